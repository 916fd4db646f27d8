#!/usr/bin/env bash
# The engine against iperf3 and iperf2 on loopback, side by side in one session so all tools
# see the same load. A benchmark, not a test: read the medians; single runs move by ±10 %.
#
#   bench/engine.sh [RUNS] [SECONDS]
#
# 1. One stream: wirerate, iperf3, iperf2 (Gbit/s, receiver side for wirerate and iperf3,
#    iperf2's client report).
# 2. -P 2: wirerate against its own one stream and against iperf2 -P 2 (threads); the
#    sending process's share of a core and CPU time per KiB at one stream and at -P 2.
# 3. -P 256, -P 1000 and -P 10000: wirerate's aggregate goodput, and each side's peak RSS
#    and thread count while it runs, against the same at -P 1 (memory per stream); the
#    aggregate as a ratio of one stream, threads per core.
# 4. UDP, 64-byte datagrams, unpaced: datagrams received per second, wirerate, iperf3, and
#    a bare sendmmsg/recvmmsg loop (crates/engine/examples/udp_ceiling.rs) as the ceiling.
#
# wirerate runs against its own `serve` process, like the other tools, not the embedded
# server. iperf2 is optional (apt-get install iperf); its cases are skipped without it.
set -euo pipefail
runs=${1:-3}
secs=${2:-3}
cd "$(dirname "$0")/.."
command -v iperf3 >/dev/null || { echo "iperf3 is not installed (apt-get install iperf3)" >&2; exit 1; }
have_iperf2=0
command -v iperf >/dev/null && have_iperf2=1
cargo build --release --quiet
cargo build --release --quiet -p wirerate-engine --example udp_ceiling
wr=${CARGO_TARGET_DIR:-$PWD/target}/release/wirerate
ceiling=${CARGO_TARGET_DIR:-$PWD/target}/release/examples/udp_ceiling
cores=$(nproc)
base=$((20000 + RANDOM % 20000))
wr_port=$base ip3_port=$((base + 1)) ip2_port=$((base + 2)) mem_port=$((base + 3))
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT

median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
ratio() { python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); print(f'{a / b:.2f}' if b else 'n/a')" "$1" "$2"; }

"$wr" serve -p "$wr_port" >/dev/null 2>&1 &
pids+=($!)
if ((have_iperf2)); then
  iperf -s -p "$ip2_port" >/dev/null 2>&1 &
  pids+=($!)
fi
sleep 0.5

# Goodput (Gbit/s), the client's (sender's) share of a core (%) and its CPU time per byte
# moved (ns per KiB): what limits one stream and -P 2 on one host.
wr_gbps_cpu() { # extra wirerate run args
  "$wr" run 127.0.0.1 -p "$wr_port" -t "$secs" -i 0 --json --no-store "$@" |
    python3 -c '
import json, sys
s = json.load(sys.stdin)["summary"]
c = s["cpu"]["local"]
print(s["goodput_bps"] / 1e9, c["process_percent"], (c["user_s"] + c["sys_s"]) * 1e9 / (s["sender_bytes"] / 1024))'
}

ip3_gbps() { # extra iperf3 client args
  iperf3 -s -1 -p "$ip3_port" >/dev/null 2>&1 &
  local spid=$!
  sleep 0.3
  iperf3 -c 127.0.0.1 -p "$ip3_port" -t "$secs" -J "$@" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e9)'
  wait "$spid" 2>/dev/null || true
}

ip2_gbps() { # extra iperf2 client args; the sum line (stream -1) or, where 2.1.8 leaves
  # it out of its CSV, the sum of the streams' lines
  iperf -c 127.0.0.1 -p "$ip2_port" -t "$secs" -y C "$@" |
    awk -F, '$6 == -1 {s = $NF; has = 1} $6 != -1 {t += $NF} END {print (has ? s : t) / 1e9}'
}

wr_udp_pps() {
  "$wr" run 127.0.0.1 -p "$wr_port" -u -b 0 -l 64 -t "$secs" -i 0 --json --no-store |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["udp"]["received_pps"])'
}

ip3_udp_pps() {
  iperf3 -s -1 -p "$ip3_port" >/dev/null 2>&1 &
  local spid=$!
  sleep 0.3
  iperf3 -c 127.0.0.1 -p "$ip3_port" -u -b 0 -l 64 -t "$secs" -J |
    python3 -c '
import json, sys
s = json.load(sys.stdin)["end"]["sum"]
print((s["packets"] - s["lost_packets"]) / s["seconds"])'
  wait "$spid" 2>/dev/null || true
}

status() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status" 2>/dev/null || true; }

# -P N against a fresh one-test server: goodput, and each side's peak RSS (KiB) and thread
# count, sampled every 0.1 s while the client runs (a loaded machine may hide short peaks).
wr_mem() {
  "$wr" serve -1 -p "$mem_port" >/dev/null 2>&1 &
  local spid=$!
  sleep 0.3
  "$wr" run 127.0.0.1 -p "$mem_port" -P "$1" -t "$secs" -i 0 --json --no-store >"$tmp/mem.json" &
  local cpid=$!
  local c_rss=0 c_thr=0 s_rss=0 s_thr=0 v
  while kill -0 "$cpid" 2>/dev/null; do
    v=$(status "$cpid" VmRSS); ((${v:-0} > c_rss)) && c_rss=$v
    v=$(status "$cpid" Threads); ((${v:-0} > c_thr)) && c_thr=$v
    v=$(status "$spid" VmRSS); ((${v:-0} > s_rss)) && s_rss=$v
    v=$(status "$spid" Threads); ((${v:-0} > s_thr)) && s_thr=$v
    sleep 0.1
  done
  wait "$cpid"
  wait "$spid" 2>/dev/null || true
  local g
  g=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["summary"]["goodput_bps"]/1e9)' "$tmp/mem.json")
  echo "$g $c_rss $c_thr $s_rss $s_thr"
}

declare -A r
add() { r[$1]+="$2 "; }
med() { tr ' ' '\n' <<<"${r[$1]:-}" | grep . | median; }

for ((i = 1; i <= runs; i++)); do
  read -r g pct ns <<<"$(wr_gbps_cpu)"
  add wr1 "$g"; add pct1 "$pct"; add ns1 "$ns"
  add ip3_1 "$(ip3_gbps)"
  ((have_iperf2)) && add ip2_1 "$(ip2_gbps)"
  read -r g pct ns <<<"$(wr_gbps_cpu -P 2)"
  add wr2 "$g"; add pct2 "$pct"; add ns2 "$ns"
  ((have_iperf2)) && add ip2_2 "$(ip2_gbps -P 2)"
  read -r g crss cthr srss sthr <<<"$(wr_mem 256)"
  add wr256 "$g"; add crss256 "$crss"; add cthr256 "$cthr"; add srss256 "$srss"; add sthr256 "$sthr"
  for n in 1000 10000; do
    read -r g crss cthr srss sthr <<<"$(wr_mem $n)"
    add wr$n "$g"; add crss$n "$crss"; add cthr$n "$cthr"; add srss$n "$srss"; add sthr$n "$sthr"
  done
  read -r g crss cthr srss sthr <<<"$(wr_mem 1)"
  add crss1 "$crss"; add srss1 "$srss"; add cthr1 "$cthr"; add sthr1 "$sthr"
  add wr_udp "$(wr_udp_pps)"
  add ip3_udp "$(ip3_udp_pps)"
  add bare_udp "$("$ceiling" "$secs" 64)"
  echo "round $i of $runs done"
done

echo
echo "== medians of $runs runs of $secs s (loopback)"
printf 'one stream   wirerate %6.2f  iperf3 %6.2f  iperf2 %s Gbit/s;  wirerate/iperf3 %s, wirerate/iperf2 %s\n' \
  "$(med wr1)" "$(med ip3_1)" "$(med ip2_1)" "$(ratio "$(med wr1)" "$(med ip3_1)")" "$(ratio "$(med wr1)" "$(med ip2_1)")"
printf -- '-P 2         wirerate %6.2f  (its one stream %.2f)  iperf2 -P 2 %s Gbit/s;  /one stream %s, /iperf2 -P 2 %s\n' \
  "$(med wr2)" "$(med wr1)" "$(med ip2_2)" "$(ratio "$(med wr2)" "$(med wr1)")" "$(ratio "$(med wr2)" "$(med ip2_2)")"
printf 'sender CPU   one stream %.0f %% of a core, %.0f ns/KiB;  -P 2 %.0f %%, %.0f ns/KiB (a core busy at both is the limit)\n' \
  "$(med pct1)" "$(med ns1)" "$(med pct2)" "$(med ns2)"
printf -- '-P 256       wirerate %6.2f Gbit/s aggregate;  /one stream %s\n' "$(med wr256)" "$(ratio "$(med wr256)" "$(med wr1)")"
printf 'memory       -P 1: client %s KiB %s threads, server %s KiB %s threads\n' \
  "$(med crss1)" "$(med cthr1)" "$(med srss1)" "$(med sthr1)"
printf '             -P 256: client %s KiB %s threads, server %s KiB %s threads;  per stream %s KiB client, %s KiB server\n' \
  "$(med crss256)" "$(med cthr256)" "$(med srss256)" "$(med sthr256)" \
  "$(python3 -c "print(round(($(med crss256) - $(med crss1)) / 255))")" \
  "$(python3 -c "print(round(($(med srss256) - $(med srss1)) / 255))")"
for n in 1000 10000; do
  printf -- '-P %-9s wirerate %6.2f Gbit/s aggregate;  /one stream %s;  client %s MiB %s threads (%s per core), server %s MiB %s threads (%s per core)\n' \
    "$n" "$(med wr$n)" "$(ratio "$(med wr$n)" "$(med wr1)")" \
    "$(python3 -c "print(round($(med crss$n) / 1024))")" "$(med cthr$n)" "$(ratio "$(med cthr$n)" "$cores")" \
    "$(python3 -c "print(round($(med srss$n) / 1024))")" "$(med sthr$n)" "$(ratio "$(med sthr$n)" "$cores")"
done
printf 'UDP 64 B     wirerate %.0f  iperf3 %.0f  bare sendmmsg/recvmmsg %.0f datagrams/s received;  wirerate/iperf3 %s, wirerate/bare %s\n' \
  "$(med wr_udp)" "$(med ip3_udp)" "$(med bare_udp)" "$(ratio "$(med wr_udp)" "$(med ip3_udp)")" "$(ratio "$(med wr_udp)" "$(med bare_udp)")"
