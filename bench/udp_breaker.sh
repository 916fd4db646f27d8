#!/bin/sh
# What `wirerate serve` sends to a UDP receiver whose return path is cut in the middle of a
# reverse test (`-u -R`): a lab of two hosts (root), the server on a, the client on b; after
# two seconds b's packets to a are dropped (a blackhole route on b: a's datagrams still
# arrive, nothing comes back, no ICMP either). Prints the bytes a put on the link after the
# cut and the seconds until it stopped sending, for a wirerate client and an iperf3 client.
#
#   bench/udp_breaker.sh [WIRERATE] [RATE] [SECONDS]
#   bench/udp_breaker.sh target/release/wirerate 50M 30
#
# WIRERATE serves (and is the wirerate client); RATE is the -b of the test, SECONDS its -t.
set -eu
BIN=$(realpath "${1:-target/release/wirerate}")
RATE=${2:-50M}
SECS=${3:-30}
NAME=brk$$
A=wr-$NAME-a
B=wr-$NAME-b
PORT=5350
LOG=$(mktemp)
PIDS=""

cleanup() {
    for p in $PIDS; do kill -9 "$p" 2>/dev/null || true; done
    "$BIN" lab down --name "$NAME" >/dev/null 2>&1 || true
    rm -f "$LOG"
}
trap cleanup EXIT

"$BIN" lab up --name "$NAME" --rate 1G --buffer 4M >/dev/null

tx() { ip netns exec "$A" cat /sys/class/net/wr0/statistics/tx_bytes; }
now() { date +%s.%N; }

# one case: $1 names it, the rest is the client's command on b
case_run() {
    what=$1
    shift
    ip netns exec "$A" "$BIN" serve -p $PORT 2>>"$LOG" &
    srv=$!
    PIDS="$PIDS $srv"
    sleep 0.5
    ip netns exec "$B" "$@" >/dev/null 2>&1 &
    cli=$!
    PIDS="$PIDS $cli"
    sleep 2
    ip netns exec "$B" ip route add blackhole 10.77.0.1/32
    t0=$(now)
    b0=$(tx)
    last=$b0
    stopped=$t0
    # until the link has been quiet (under 4 KB in 100 ms) for 2 s, or 20 s past the test
    limit=$(echo "$SECS + 20" | bc)
    while :; do
        sleep 0.1
        b=$(tx)
        t=$(now)
        if [ $((b - last)) -ge 4096 ]; then stopped=$t; fi
        last=$b
        quiet=$(echo "$t - $stopped >= 2" | bc)
        over=$(echo "$t - $t0 >= $limit" | bc)
        if [ "$quiet" = 1 ] || [ "$over" = 1 ]; then break; fi
    done
    after=$((last - b0))
    secs=$(echo "$stopped - $t0" | bc)
    printf '%-9s bytes sent after the cut: %12d (%.1f MB); sending stopped %.1f s after the cut\n' \
        "$what" "$after" "$(echo "$after / 1000000" | bc -l)" "$secs"
    kill -9 "$cli" "$srv" 2>/dev/null || true
    wait "$cli" "$srv" 2>/dev/null || true
    ip netns exec "$B" ip route del blackhole 10.77.0.1/32
}

case_run wirerate "$BIN" run 10.77.0.1 -p $PORT -u -R -b "$RATE" -t "$SECS"
case_run iperf3 iperf3 -c 10.77.0.1 -p $PORT -u -R -b "$RATE" -t "$SECS"
echo "server log:"
sed 's/^/  /' "$LOG"
