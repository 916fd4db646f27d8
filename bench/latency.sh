#!/usr/bin/env bash
# Loopback request/response of `wirerate rr` against its peers, run alternating on the same
# machine so both see the same load. A benchmark, not a test: read the medians and ratios,
# single runs move with the machine's load. (Size sweeps against NetPIPE: bench/sweep.sh.)
#
#   bench/latency.sh [RUNS] [SECONDS]
#
# 1. TCP_RR round trip p50 (µs), 16-byte request and response: `wirerate rr` against
#    `sockperf ping-pong --tcp --full-rtt -m 16` (16 bytes is sockperf's smallest TCP
#    message), and the median ratio wirerate ÷ sockperf (target: at most 1.05).
# 2. TCP_CRR transactions per second, 1 byte each way: `wirerate rr --mode crr` against
#    bench/crr_loop.c (connect, write, read to the server's close, close; compiled here with
#    cc), and the median ratio wirerate ÷ loop (target: at least 0.9).
# 3. Open loop at 10 000 transactions per second, 16 bytes: `wirerate rr --rate 10000`
#    against `sockperf ping-pong --mps 10000`. sockperf times each message from its actual
#    send; wirerate reports that as open_loop.uncorrected, and beside it the round trip from
#    the scheduled send (rtt_*, corrected) and how late the sends left. The ratio compares
#    like with like: uncorrected p50 ÷ sockperf p50.
set -euo pipefail
runs=${1:-5}
secs=${2:-3}
cd "$(dirname "$0")/.."
command -v sockperf >/dev/null || { echo "sockperf is not installed (apt-get install sockperf)" >&2; exit 1; }
cargo build --release --quiet -p wirerate
wr=target/release/wirerate
tmp=$(mktemp -d)
cc -O2 -o "$tmp/crr_loop" bench/crr_loop.c
port=$((20000 + RANDOM % 20000))
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT

median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
ratio() { python3 -c "print(round($1/$2, 3))"; }
# one figure of a wirerate rr JSON result: a python expression over rr (summary.rr)
wr_rr() { # expression, rr arguments...
  local expr=$1
  shift
  "$wr" rr -t "$secs" -i 0 --json --no-store "$@" |
    python3 -c "import json,sys; rr=json.load(sys.stdin)['summary']['rr']; print($expr)"
}
sp_p50() { # extra sockperf arguments
  sockperf ping-pong --tcp -i 127.0.0.1 -p "$port" -m 16 -t "$secs" --full-rtt "$@" 2>&1 |
    awk '/percentile 50.000/ {print $NF}'
}

sockperf server --tcp -i 127.0.0.1 -p "$port" >/dev/null 2>&1 &
pids+=($!)
"$tmp/crr_loop" server "$((port + 1))" &
pids+=($!)
sleep 0.5

echo "== TCP_RR round trip p50 (µs), 16 B, $runs runs of $secs s"
: >"$tmp/rr_wr"; : >"$tmp/rr_sp"; : >"$tmp/rr_ratio"
for i in $(seq "$runs"); do
  a=$(wr_rr "rr['rtt_p50_us']" --request 16 --response 16)
  s=$(sp_p50)
  echo "run $i: wirerate $a, sockperf $s"
  echo "$a" >>"$tmp/rr_wr"; echo "$s" >>"$tmp/rr_sp"; ratio "$a" "$s" >>"$tmp/rr_ratio"
done
printf 'median: wirerate %s µs, sockperf %s µs; median ratio wirerate ÷ sockperf %s\n' \
  "$(median <"$tmp/rr_wr")" "$(median <"$tmp/rr_sp")" "$(median <"$tmp/rr_ratio")"

echo "== TCP_CRR transactions/s, 1 B each way, $runs runs of $secs s"
: >"$tmp/crr_wr"; : >"$tmp/crr_c"; : >"$tmp/crr_ratio"
for i in $(seq "$runs"); do
  a=$(wr_rr "round(rr['tps'])" --mode crr)
  c=$("$tmp/crr_loop" client "$((port + 1))" "$secs" | awk '{print $3}')
  echo "run $i: wirerate $a, C loop $c"
  echo "$a" >>"$tmp/crr_wr"; echo "$c" >>"$tmp/crr_c"; ratio "$a" "$c" >>"$tmp/crr_ratio"
done
printf 'median: wirerate %s, C loop %s; median ratio wirerate ÷ loop %s\n' \
  "$(median <"$tmp/crr_wr")" "$(median <"$tmp/crr_c")" "$(median <"$tmp/crr_ratio")"

echo "== open loop, 10 000 transactions/s, 16 B, p50 (µs), $runs runs of $secs s"
: >"$tmp/ol_c"; : >"$tmp/ol_u"; : >"$tmp/ol_l"; : >"$tmp/ol_sp"; : >"$tmp/ol_ratio"
for i in $(seq "$runs"); do
  read -r c u l < <(wr_rr "rr['rtt_p50_us'], rr['open_loop']['uncorrected']['rtt_p50_us'], rr['open_loop']['send_lateness_p50_us']" \
    --rate 10000 --request 16 --response 16 | tr -d '(),')
  s=$(sp_p50 --mps 10000)
  echo "run $i: wirerate corrected $c, uncorrected $u, send lateness $l; sockperf $s"
  echo "$c" >>"$tmp/ol_c"; echo "$u" >>"$tmp/ol_u"; echo "$l" >>"$tmp/ol_l"; echo "$s" >>"$tmp/ol_sp"
  ratio "$u" "$s" >>"$tmp/ol_ratio"
done
printf 'median: wirerate corrected %s µs, uncorrected %s µs, send lateness %s µs; sockperf %s µs; median ratio uncorrected ÷ sockperf %s\n' \
  "$(median <"$tmp/ol_c")" "$(median <"$tmp/ol_u")" "$(median <"$tmp/ol_l")" \
  "$(median <"$tmp/ol_sp")" "$(median <"$tmp/ol_ratio")"
