#!/usr/bin/env bash
# Loopback throughput of wirerate against iperf3, run back to back on the same machine at the
# same time, so both see the same load.
# Prints each run and the median ratio. A benchmark, not a test: machine noise moves single
# runs by ±12 %, so read the medians.
#
#   bench/loopback.sh [RUNS] [SECONDS]
set -euo pipefail
runs=${1:-5}
secs=${2:-5}
cd "$(dirname "$0")/.."
command -v iperf3 >/dev/null || { echo "iperf3 is not installed (apt-get install iperf3)" >&2; exit 1; }
cargo build --release --quiet
wr=target/release/wirerate
port=$((20000 + RANDOM % 20000))

median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

iperf3_gbps() { # extra iperf3 client args
  iperf3 -s -1 -p "$port" >/dev/null 2>&1 &
  local spid=$!
  sleep 0.3
  iperf3 -c 127.0.0.1 -p "$port" -t "$secs" -J "$@" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e9)'
  wait "$spid" 2>/dev/null || true
}

wirerate_gbps() { # extra wirerate run args
  "$wr" run -t "$secs" -i 0 --json "$@" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["goodput_bps"]/1e9)'
}

declare -A results
cases=("iperf3 default|iperf3|" "iperf3 -P 2|iperf3|-P 2" "wirerate default|wirerate|" "wirerate -P 2|wirerate|-P 2")
for ((i = 1; i <= runs; i++)); do
  for c in "${cases[@]}"; do
    IFS='|' read -r name tool args <<<"$c"
    # shellcheck disable=SC2086
    v=$(${tool}_gbps $args)
    results[$name]+="$v "
    printf '%-18s run %d: %6.2f Gbit/s\n' "$name" "$i" "$v"
  done
done
echo
for c in "${cases[@]}"; do
  IFS='|' read -r name _ _ <<<"$c"
  m=$(tr ' ' '\n' <<<"${results[$name]}" | grep . | median)
  results["median $name"]=$m
  printf 'median %-18s %6.2f Gbit/s  (runs: %s)\n' "$name" "$m" "${results[$name]}"
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
echo
echo "wirerate default / iperf3 default:  $(ratio "${results[median wirerate default]}" "${results[median iperf3 default]}")"
echo "wirerate -P 2 / iperf3 -P 2:        $(ratio "${results[median wirerate -P 2]}" "${results[median iperf3 -P 2]}")"
echo "wirerate -P 2 / wirerate default:   $(ratio "${results[median wirerate -P 2]}" "${results[median wirerate default]}")"
