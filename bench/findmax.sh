#!/usr/bin/env bash
# Repeatability of `wirerate run -u --find-max` on loopback: several searches back to back,
# alternating between the binaries given (e.g. an older build and this one), each search's
# rate found, lowest failing rate, confidence and trials, then per binary the spread of the
# rates found (max ÷ min) and their median. A benchmark, not a test: the machine's load moves
# every figure; run it on a quiet host.
#
#   bench/findmax.sh [RUNS] [SECONDS PER TRIAL] [BINARY...]
#   LAB_RATE=200M bench/findmax.sh [RUNS] [SECONDS PER TRIAL] [BINARY...]
#
# Default: 3 searches of 1 s trials with target/release/wirerate (built here). With LAB_RATE
# (needs root) the searches cross a `wirerate lab` link shaped to that rate instead of
# loopback, each starting a fifth above it (--link), loss limit 0.5 %: the capacity is the
# shaper's, so the searches should agree within 5 %. The lab is removed at the end.
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
lab_rate=${LAB_RATE:-}
lab=fmbench$$
server=
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  if [ -n "$lab_rate" ]; then "${bins[0]}" lab down --name "$lab" >/dev/null 2>&1 || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
where=()
if [ -n "$lab_rate" ]; then
  "${bins[0]}" lab up --name "$lab" --rate "$lab_rate" >/dev/null
  "${bins[0]}" lab exec --name "$lab" a -- "$(realpath "${bins[0]}")" serve -p 5350 >"$tmp/server.log" 2>&1 &
  server=$!
  sleep 1
  link=$(python3 -c "
r = '$lab_rate'; m = {'K': 1e3, 'M': 1e6, 'G': 1e9}
v = float(r[:-1]) * m[r[-1].upper()] if r[-1].upper() in m else float(r)
print('%dM' % round(v * 1.2 / 1e6))")
  where=(10.77.0.1 -p 5350 --link "$link" --loss 0.5)
fi

# one search with binary $1: its JSON on stdout
search() {
  if [ -n "$lab_rate" ]; then
    "${bins[0]}" lab exec --name "$lab" b -- "$(realpath "$1")" run "${where[@]}" -u --find-max -t "$secs" --no-store --json
  else
    "$1" run -u --find-max -t "$secs" --no-store --json
  fi
}

for i in $(seq "$runs"); do
  for b in "${bins[@]}"; do
    start=$(date +%s.%N)
    out=$(search "$b" 2>/dev/null || true)
    end=$(date +%s.%N)
    line=$(printf '%s' "$out" | python3 -c '
import json, sys
d = json.load(sys.stdin)
c = d.get("confidence") or {}
g = lambda v: "-" if v is None else "%.4f" % (v / 1e9)
lvl = c.get("level_percent")
sp = c.get("capacity_spread")
print(g(d["max_rate_bps"]), g(c.get("lowest_fail_bps")), "%d/%d" % (c.get("passed", 0), c.get("trials", 0)),
      "-" if lvl is None else "%.0f%%" % lvl, "yes" if c.get("confirmed") else "no", len(d["steps"]),
      "-" if sp is None else "%.3f" % sp, c.get("grade") or "-")')
    secs_taken=$(python3 -c "print(round($end - $start, 1))")
    echo "$b run $i: found $(echo "$line" | awk '{print $1}') Gbit/s, lowest fail $(echo "$line" | awk '{print $2}'), passed $(echo "$line" | awk '{print $3}'), confidence $(echo "$line" | awk '{print $4}'), confirmed $(echo "$line" | awk '{print $5}'), $(echo "$line" | awk '{print $6}') trials, capacity spread $(echo "$line" | awk '{print $7}'), grade $(echo "$line" | awk '{print $8}'), ${secs_taken} s"
    echo "$line" | awk '{print $1}' >>"$tmp/$(echo "$b" | tr / _)"
  done
done
for b in "${bins[@]}"; do
  f="$tmp/$(echo "$b" | tr / _)"
  python3 - "$b" "$f" <<'PY'
import statistics, sys
v = [float(x) for x in open(sys.argv[2]) if x.strip() not in ("", "-")]
if v:
    print(f"{sys.argv[1]}: found {', '.join('%.4f' % x for x in v)} Gbit/s; median {statistics.median(v):.4f}, spread max/min {max(v) / min(v):.3f}x")
else:
    print(f"{sys.argv[1]}: no rate found")
PY
done
