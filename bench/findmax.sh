#!/usr/bin/env bash
# Repeatability of `wirerate run -u --find-max` on loopback: several searches back to back,
# alternating between the binaries given (e.g. an older build and this one), each search's
# rate found, lowest failing rate, confidence and trials, then per binary the spread of the
# rates found (max ÷ min) and their median. A benchmark, not a test: the machine's load moves
# every figure; run it on a quiet host.
#
#   bench/findmax.sh [RUNS] [SECONDS PER TRIAL] [BINARY...]
#
# Default: 3 searches of 1 s trials with target/release/wirerate (built here).
set -euo pipefail
runs=${1:-3}
secs=${2:-1}
shift $(( $# > 2 ? 2 : $# ))
cd "$(dirname "$0")/.."
bins=("$@")
if [ ${#bins[@]} -eq 0 ]; then
  cargo build --release --quiet -p wirerate
  bins=(target/release/wirerate)
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for i in $(seq "$runs"); do
  for b in "${bins[@]}"; do
    start=$(date +%s.%N)
    out=$("$b" run -u --find-max -t "$secs" --no-store --json 2>/dev/null || true)
    end=$(date +%s.%N)
    line=$(printf '%s' "$out" | python3 -c '
import json, sys
d = json.load(sys.stdin)
c = d.get("confidence") or {}
g = lambda v: "-" if v is None else "%.2f" % (v / 1e9)
lvl = c.get("level_percent")
print(g(d["max_rate_bps"]), g(c.get("lowest_fail_bps")), "%d/%d" % (c.get("passed", 0), c.get("trials", 0)),
      "-" if lvl is None else "%.0f%%" % lvl, "yes" if c.get("confirmed") else "no", len(d["steps"]))')
    secs_taken=$(python3 -c "print(round($end - $start, 1))")
    echo "$b run $i: found $(echo "$line" | awk '{print $1}') Gbit/s, lowest fail $(echo "$line" | awk '{print $2}'), passed $(echo "$line" | awk '{print $3}'), confidence $(echo "$line" | awk '{print $4}'), confirmed $(echo "$line" | awk '{print $5}'), $(echo "$line" | awk '{print $6}') trials, ${secs_taken} s"
    echo "$line" | awk '{print $1}' >>"$tmp/$(echo "$b" | tr / _)"
  done
done
for b in "${bins[@]}"; do
  f="$tmp/$(echo "$b" | tr / _)"
  python3 - "$b" "$f" <<'PY'
import statistics, sys
v = [float(x) for x in open(sys.argv[2]) if x.strip() not in ("", "-")]
if v:
    print(f"{sys.argv[1]}: found {', '.join('%.2f' % x for x in v)} Gbit/s; median {statistics.median(v):.2f}, spread max/min {max(v) / min(v):.3f}x")
else:
    print(f"{sys.argv[1]}: no rate found")
PY
done
