#!/usr/bin/env bash
# `wirerate sweep` against NetPIPE (NPtcp) over loopback: the same schedule (1 B to MAX,
# powers of two and 1.5 × powers of two, ±3 bytes), the two tools run alternately so both
# see the same load. A benchmark, not a test: read the medians, single runs move with the
# machine's load.
#
#   bench/sweep.sh [RUNS] [MAX]        (defaults: 3 runs, MAX 8388608 bytes)
#
# Prints, over the RUNS runs:
# - per size (every size from 1 KiB, and 1 byte): the median throughput of each tool
#   (NetPIPE's Mbit/s of 2^20 bits, from the best trial) and the median of the per-run
#   ratios wirerate ÷ NPtcp;
# - Hockney's r∞, n½ and t0 of both, each np.out fitted by wirerate's own rule
#   (`wirerate sweep --fit`: each size's best trial, as NetPIPE keeps it), medians over
#   runs, and their ratios;
# - both tools' wall time per run, medians.
# KEEP=DIR keeps every np.out (np.N, wr.N) and its fit in DIR.
# Each tool runs against a server process of its own (NPtcp's receiver, `wirerate serve -1`).
# NPtcp's -l and -p 0 are not used: the packaged NPtcp fails to start above 1 byte, and
# hangs without perturbations.
set -euo pipefail
runs=${1:-3}
max=${2:-8388608}
cd "$(dirname "$0")/.."
command -v NPtcp >/dev/null || { echo "NPtcp is not installed (apt-get install netpipe-tcp)" >&2; exit 1; }
cargo build --release --quiet -p wirerate
wr=$PWD/target/release/wirerate
tmp=$(mktemp -d)
server=""
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

now() { date +%s.%N; }

listening() { # port: wait up to 10 s for a listener (a loaded host starts servers slowly)
  for _ in $(seq 100); do
    ss -Hltn "sport = :$1" | grep -q . && return 0
    kill -0 "$server" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

serve() { # command with PORT for its port: starts it on a free port, sets server and port
  local try
  for try in 1 2 3 4 5; do
    port=$((20000 + RANDOM % 10000))
    "${@//PORT/$port}" >/dev/null 2>"$tmp/server.err" &
    server=$!
    listening "$port" && return 0
    kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true
  done
  echo "no server would listen:" >&2; cat "$tmp/server.err" >&2; exit 1
}

run_np() { # run number
  local port t0
  serve NPtcp -P PORT
  t0=$(now)
  (cd "$tmp" && NPtcp -h 127.0.0.1 -P "$port" -u "$max" -o "np.$1" >/dev/null 2>&1) || true
  echo "$(now) - $t0" | bc >>"$tmp/np.wall"
  wait "$server" 2>/dev/null || true
  server=""
}

run_wr() { # run number
  local port t0
  # a server process of its own, as NPtcp's receiver is
  serve "$wr" serve -B 127.0.0.1 -p PORT -1
  t0=$(now)
  "$wr" sweep 127.0.0.1 -p "$port" --max "$max" --format netpipe --no-store \
    >"$tmp/wr.$1" 2>"$tmp/wr.$1.err" ||
    { echo "wirerate sweep failed:" >&2; cat "$tmp/wr.$1.err" >&2; exit 1; }
  echo "$(now) - $t0" | bc >>"$tmp/wr.wall"
  wait "$server" 2>/dev/null || true
  server=""
}

cc=$(cat /proc/sys/net/ipv4/tcp_congestion_control 2>/dev/null || echo unknown)
echo "== sweep 1 B to $max B, $runs runs, NPtcp and wirerate alternating, congestion control $cc"
# under bbr, sizes past 1 MiB run in one of two modes (docs/latency.md): read them per run
if [ "$cc" = bbr ]; then echo "   (bbr: sizes from 1.5 MiB depend on when each connection left bbr's start-up)"; fi
for i in $(seq "$runs"); do
  if ((i % 2)); then run_np "$i"; run_wr "$i"; else run_wr "$i"; run_np "$i"; fi
  printf 'run %s: NPtcp %.1f s, wirerate %.1f s\n' "$i" "$(tail -1 "$tmp/np.wall")" "$(tail -1 "$tmp/wr.wall")"
done

# Hockney's fit of every np.out by wirerate's own rule (`sweep --fit`), one JSON line each
for f in "$tmp"/np.[0-9]* "$tmp"/wr.[0-9]*; do
  case $f in *.err) continue ;; esac
  [ -s "$f" ] && "$wr" sweep --fit "$f" --json >"$f.fit" 2>/dev/null || true
done
if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$tmp"/np.* "$tmp"/wr.* "$KEEP"/; fi

python3 - "$tmp" "$runs" <<'EOF'
import json, statistics as st, sys
tmp, runs = sys.argv[1], int(sys.argv[2])

def load(path):
    rows = {}
    try:
        for line in open(path):
            f = line.split()
            if len(f) >= 3:
                rows[int(float(f[0]))] = (float(f[1]), float(f[2]))
    except FileNotFoundError:
        pass
    return rows

def fit(path):
    """wirerate's fit of one np.out: (r bit/s, n_half B, t0 s, sizes set aside) or None."""
    try:
        f = json.load(open(path + ".fit")).get("fit")
    except (FileNotFoundError, ValueError):
        return None
    return f and (f["r_inf_bps"], f["n_half_bytes"], f["t0_us"] / 1e6, f.get("set_aside", 0))

pairs = [(load(f"{tmp}/np.{i}"), load(f"{tmp}/wr.{i}"), i) for i in range(1, runs + 1)]
pairs = [(n, w, i) for n, w, i in pairs if n and w]
if not pairs:
    sys.exit("no complete runs")
common = sorted(set.intersection(*[set(n) & set(w) for n, w, _ in pairs]))

print(f"\nper size, medians of {len(pairs)} alternating runs (Mbit/s of 2^20 bits, best trial);"
      " ratio: median of the per-run ratios wirerate / NPtcp;\nNP/NP: the same median of"
      " NPtcp's run i+1 / run i, how far NPtcp disagrees with itself (the noise floor)")
print(f"{'bytes':>9} {'NPtcp':>10} {'wirerate':>10} {'ratio':>6} {'NP/NP':>6}")
ratio, self_ratio = {}, {}
for b in common:
    ratio[b] = st.median(w[b][0] / n[b][0] for n, w, _ in pairs if n[b][0] > 0)
    nps = [n[b][0] for n, _, _ in pairs]
    self_ratio[b] = st.median(nps[(k + 1) % len(nps)] / nps[k] for k in range(len(nps)) if nps[k] > 0)
big = [b for b in common if b >= 1024]
for b in common:
    if b >= 1024 or b == 1:
        mark = "  < 0.9" if b >= 1024 and ratio[b] < 0.9 else ""
        print(f"{b:>9} {st.median(n[b][0] for n, _, _ in pairs):>10.1f} "
              f"{st.median(w[b][0] for _, w, _ in pairs):>10.1f} {ratio[b]:>6.2f} "
              f"{self_ratio[b]:>6.2f}{mark}")
if big:
    for label, r in (("wirerate / NPtcp", ratio), ("NPtcp / NPtcp", self_ratio)):
        worst = min(big, key=lambda b: r[b])
        print(f"{label:>16}: {len(big)} sizes from 1 KiB, median ratio {st.median(r[b] for b in big):.2f}, "
              f"at or above 0.9: {sum(r[b] >= 0.9 for b in big)}, lowest {worst} B ({r[worst]:.2f})")
if 1 in common:
    print(f"1-byte one-way: NPtcp {st.median(n[1][1] for n, _, _ in pairs)*1e6:.2f} µs, "
          f"wirerate {st.median(w[1][1] for _, w, _ in pairs)*1e6:.2f} µs")

print("\nHockney fit of each np.out by wirerate's rule (`wirerate sweep --fit`), medians over runs:")
fits = {}
for name, tag in (("NPtcp", "np"), ("wirerate", "wr")):
    fs = [f for f in (fit(f"{tmp}/{tag}.{i}") for _, _, i in pairs) if f]
    fits[name] = fs
    if not fs:
        print(f"{name:>9}: no fit with n½ within the sizes")
        continue
    r, nh, t0 = (st.median(x[k] for x in fs) for k in range(3))
    aside = "/".join(str(x[3]) for x in fs)
    print(f"{name:>9}: r∞ {r/1e9:7.2f} Gbit/s, n½ {nh:9.0f} B, t0 {t0*1e6:6.2f} µs"
          f"  ({len(fs)} runs; sizes set aside {aside})")
a, b = fits["NPtcp"], fits["wirerate"]
if a and b:
    for k, label in ((0, "r∞"), (1, "n½"), (2, "t0")):
        q = st.median(x[k] for x in b) / st.median(x[k] for x in a)
        print(f"  {label} wirerate / NPtcp: {q:.2f}{'' if abs(q - 1) <= 0.1 else '  (off by more than 10 %)'}")

walls = lambda p: [float(x) for x in open(p)]
nw, ww = walls(f"{tmp}/np.wall"), walls(f"{tmp}/wr.wall")
print(f"\nwall time, median: NPtcp {st.median(nw):.1f} s, wirerate {st.median(ww):.1f} s "
      f"(ratio {st.median(ww) / st.median(nw):.2f})")
EOF
