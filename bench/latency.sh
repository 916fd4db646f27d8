#!/usr/bin/env bash
# Loopback latency and size sweeps of wirerate against sockperf and NetPIPE (NPtcp), run back
# to back on the same machine so both see the same load. A benchmark, not a test: read the
# medians, single runs move with the machine's load.
#
#   bench/latency.sh [RUNS] [SECONDS] [SWEEP_MAX]
#
# 1. Round trip p50 (µs): `wirerate rr` (1-byte and 16-byte transactions) against
#    `sockperf ping-pong --tcp --full-rtt -m 16` (16 bytes is sockperf's smallest TCP
#    message here), RUNS runs of SECONDS each, and the median ratio wirerate ÷ sockperf.
# 2. Throughput per size: `wirerate sweep --format netpipe` against NPtcp up to SWEEP_MAX
#    bytes (same schedule, same ±3 perturbations), the ratio wirerate ÷ NPtcp per size and
#    its median, and both tools' one-way time of a 1-byte message.
set -euo pipefail
runs=${1:-3}
secs=${2:-3}
max=${3:-1048576}
cd "$(dirname "$0")/.."
for t in sockperf NPtcp; do
  command -v "$t" >/dev/null || { echo "$t is not installed (apt-get install sockperf netpipe-tcp)" >&2; exit 1; }
done
cargo build --release --quiet
wr=target/release/wirerate
port=$((20000 + RANDOM % 20000))
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT

median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

wr_p50() { # request/response size
  "$wr" rr -t "$secs" -i 0 --request "$1" --response "$1" --json --no-store |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["rr"]["rtt_p50_us"])'
}

sockperf server --tcp -i 127.0.0.1 -p "$port" >/dev/null 2>&1 &
pids+=($!)
sleep 0.5
sp_p50() {
  sockperf ping-pong --tcp -i 127.0.0.1 -p "$port" -m 16 -t "$secs" --full-rtt 2>&1 |
    awk '/percentile 50.000/ {print $NF}'
}

echo "== round trip p50 (µs), $runs runs of $secs s"
: >"$tmp/wr1"; : >"$tmp/wr16"; : >"$tmp/sp"; : >"$tmp/ratio"
for i in $(seq "$runs"); do
  a=$(wr_p50 1); b=$(wr_p50 16); s=$(sp_p50)
  echo "run $i: wirerate rr 1 B $a, 16 B $b; sockperf 16 B $s"
  echo "$a" >>"$tmp/wr1"; echo "$b" >>"$tmp/wr16"; echo "$s" >>"$tmp/sp"
  python3 -c "print($a/$s)" >>"$tmp/ratio"
done
printf 'median: wirerate 1 B %s µs, 16 B %s µs, sockperf 16 B %s µs; wirerate 1 B ÷ sockperf %s\n' \
  "$(median <"$tmp/wr1")" "$(median <"$tmp/wr16")" "$(median <"$tmp/sp")" "$(median <"$tmp/ratio")"

echo "== sweep throughput per size, 1 B to $max B"
np_port=$((port + 1))
NPtcp -P "$np_port" >/dev/null 2>&1 &
pids+=($!)
sleep 0.5
(cd "$tmp" && NPtcp -h 127.0.0.1 -P "$np_port" -u "$max" -o np.out >/dev/null 2>&1)
"$wr" sweep --max "$max" --format netpipe --no-store >"$tmp/wr.out"
python3 - "$tmp/np.out" "$tmp/wr.out" <<'EOF'
import statistics, sys
def load(p):
    rows = {}
    for line in open(p):
        f = line.split()
        if len(f) >= 3:
            rows[int(float(f[0]))] = (float(f[1]), float(f[2]))
    return rows
np, wr = load(sys.argv[1]), load(sys.argv[2])
common = sorted(set(np) & set(wr))
ratios = []
print(f"{'bytes':>9} {'NPtcp Mbps':>12} {'wirerate Mbps':>14} {'ratio':>7}")
for b in common:
    r = wr[b][0] / np[b][0] if np[b][0] > 0 else float('nan')
    ratios.append(r)
    if b & (b - 1) == 0:  # print powers of two; the median uses every common size
        print(f"{b:>9} {np[b][0]:>12.2f} {wr[b][0]:>14.2f} {r:>7.2f}")
print(f"median ratio wirerate ÷ NPtcp over {len(common)} sizes: {statistics.median(ratios):.2f}; "
      f"sizes where wirerate ≥ NPtcp: {sum(r >= 1 for r in ratios)}")
if 1 in common:
    print(f"1-byte one-way: NPtcp {np[1][1]*1e6:.2f} µs, wirerate sweep {wr[1][1]*1e6:.2f} µs")
EOF
