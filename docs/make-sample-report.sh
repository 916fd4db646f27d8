#!/usr/bin/env bash
# Regenerates docs/report-sample.html and docs/report-sample/*.svg from real runs:
#   - as root: runs on an emulated 100 Mbit/s Ethernet (`wirerate lab`), one stream
#     against four, labelled "P1" and "P4", five runs each;
#   - otherwise: the same over loopback (an embedded server).
# The report compares the two labels (box plots, the verdict, the A/B table) and shows
# the latest run of each in detail. Nothing outside the machine is reached.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --quiet -p wirerate
bin="${CARGO_TARGET_DIR:-target}/release/wirerate"
work=$(mktemp -d)
db="$work/results.db"
lab=""
server=""

cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  if [ -n "$lab" ]; then "$bin" lab down --name "$lab" >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

runs=5
if [ "$(id -u)" = 0 ] && command -v ip >/dev/null && command -v tc >/dev/null; then
  lab="demo"
  "$bin" lab up --name "$lab" --rate 100M >/dev/null
  "$bin" lab exec --name "$lab" a -- "$bin" serve -p 5350 >/dev/null 2>&1 &
  server=$!
  for _ in $(seq 50); do
    "$bin" lab exec --name "$lab" a -- ss -Hltn "sport = :5350" | grep -q . && break
    sleep 0.1
  done
  target=("$bin" lab exec --name "$lab" b -- "$bin" run 10.77.0.1 -p 5350)
  where="an emulated 100 Mbit/s Ethernet (wirerate lab)"
else
  target=("$bin" run)
  where="loopback (not root: no lab)"
fi

for p in 1 4; do
  for _ in $(seq "$runs"); do
    "${target[@]}" -t 2 -i 0.5 -P "$p" --label "P$p" --db "$db" >/dev/null
  done
done

rm -rf docs/report-sample
"$bin" report --db "$db" P1 P4 -o docs/report-sample.html --svg docs/report-sample
echo "sample report made on $where"
