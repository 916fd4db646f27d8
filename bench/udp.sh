#!/usr/bin/env bash
# The CPU a paced UDP sender costs, wirerate against iperf3, on loopback: each client sends
# RATE of LEN-byte datagrams for SECONDS to its own server process (`wirerate serve`,
# `iperf3 -s`), the two alternating, RUNS rounds. The client process's CPU time (user + sys,
# from wait4) is divided by the test's seconds (share of a core) and by the datagrams it
# sent (µs per datagram); the medians and the ratio wirerate ÷ iperf3 are printed. A
# benchmark, not a test: on a loaded machine single runs move by ±10 %.
#
#   bench/udp.sh [RUNS] [SECONDS] [RATE] [LEN]      (defaults: 5 5 500M 1400)
set -euo pipefail
runs=${1:-5}
secs=${2:-5}
rate=${3:-500M}
len=${4:-1400}
cd "$(dirname "$0")/.."
command -v iperf3 >/dev/null || { echo "iperf3 is not installed (apt-get install iperf3)" >&2; exit 1; }
# WR=path runs that wirerate binary instead of building this tree's
wr=${WR:-}
if [[ -z $wr ]]; then
  cargo build --release --quiet -p wirerate
  wr=${CARGO_TARGET_DIR:-$PWD/target}/release/wirerate
fi
base=$((20000 + RANDOM % 20000))
wr_port=$base ip3_port=$((base + 1))
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT

median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
ratio() { python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); print(f'{a / b:.2f}' if b else 'n/a')" "$1" "$2"; }

"$wr" serve -p "$wr_port" >/dev/null 2>&1 &
pids+=($!)
iperf3 -s -p "$ip3_port" >/dev/null 2>&1 &
pids+=($!)
sleep 0.5

# Runs a client, prints "<share of a core, %> <µs per datagram> <sent bit/s>": its CPU
# from wait4, its datagram count and rate from its own JSON.
measure() { # json-reading python, client command...
  local pick=$1
  shift
  /usr/bin/time -f "%U %S" -o "$tmp/time" "$@" >"$tmp/out.json" 2>/dev/null
  python3 - "$tmp/time" "$tmp/out.json" "$secs" "$pick" <<'EOF'
import json, sys
t, out, secs, pick = sys.argv[1:]
u, s = map(float, open(t).read().split()[-2:])
j = json.load(open(out))
packets, bps = eval(pick)
cpu = u + s
print(f"{cpu / float(secs) * 100:.1f} {cpu / packets * 1e6:.2f} {bps:.0f}")
EOF
}

wr_pick='(j["summary"]["udp"]["packets"], j["summary"]["sender_bps"])'
ip3_pick='(j["end"]["sum"]["packets"], j["end"]["sum"]["bits_per_second"])'
: >"$tmp/wr" && : >"$tmp/ip3"
for _ in $(seq "$runs"); do
  measure "$wr_pick" "$wr" run 127.0.0.1 -p "$wr_port" -u -b "$rate" -l "$len" -t "$secs" \
    -i 0 --json --no-store >>"$tmp/wr"
  measure "$ip3_pick" iperf3 -c 127.0.0.1 -p "$ip3_port" -u -b "$rate" -l "$len" -t "$secs" \
    -J >>"$tmp/ip3"
done

col() { awk -v c="$2" '{print $c}' "$1" | median; }
printf 'UDP sender on loopback, %s of %s-byte datagrams, %s s, %s runs each (medians)\n' \
  "$rate" "$len" "$secs" "$runs"
printf '%-10s %14s %14s %16s\n' tool "core share %" "µs/datagram" "sent bit/s"
for t in wr ip3; do
  name=$([[ $t == wr ]] && echo wirerate || echo iperf3)
  printf '%-10s %14s %14s %16s\n' "$name" "$(col "$tmp/$t" 1)" "$(col "$tmp/$t" 2)" "$(col "$tmp/$t" 3)"
done
printf 'wirerate ÷ iperf3: CPU per datagram %s, share of a core %s\n' \
  "$(ratio "$(col "$tmp/wr" 2)" "$(col "$tmp/ip3" 2)")" \
  "$(ratio "$(col "$tmp/wr" 1)" "$(col "$tmp/ip3" 1)")"
