#!/usr/bin/env bash
# `wirerate sweep` against NetPIPE (NPtcp) over loopback: the same schedule (1 B to MAX,
# powers of two and 1.5 × powers of two, ±3 bytes), the two tools run alternately so both
# see the same load. A benchmark, not a test: read the medians, single runs move with the
# machine's load.
#
#   bench/sweep.sh [RUNS] [MAX]        (defaults: 3 runs, MAX 4194304 bytes)
#
# Prints, over the RUNS runs:
# - per size (powers of two from 1 KiB, and the worst size from 1 KiB up): the median
#   throughput of each tool (NetPIPE's Mbit/s of 2^20 bits, from the best trial) and the
#   median of the per-run ratios wirerate ÷ NPtcp;
# - Hockney's r∞, n½ and t0 of both, each fitted the same way to its np.out rows (each
#   size's best trial, as NetPIPE keeps it; least squares weighted by 1/T², sizes both
#   tools measured), medians over runs;
# - both tools' wall time per run, medians.
# Each tool runs against a server process of its own (NPtcp's receiver, `wirerate serve -1`).
# NPtcp's -l and -p 0 are not used: the packaged NPtcp fails to start above 1 byte, and
# hangs without perturbations.
set -euo pipefail
runs=${1:-3}
max=${2:-4194304}
cd "$(dirname "$0")/.."
command -v NPtcp >/dev/null || { echo "NPtcp is not installed (apt-get install netpipe-tcp)" >&2; exit 1; }
cargo build --release --quiet -p wirerate
wr=$PWD/target/release/wirerate
tmp=$(mktemp -d)
server=""
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

now() { date +%s.%N; }

run_np() { # run number
  local port=$((20000 + RANDOM % 20000)) t0
  NPtcp -P "$port" >/dev/null 2>&1 &
  server=$!
  sleep 0.3
  t0=$(now)
  (cd "$tmp" && NPtcp -h 127.0.0.1 -P "$port" -u "$max" -o "np.$1" >/dev/null 2>&1) || true
  echo "$(now) - $t0" | bc >>"$tmp/np.wall"
  wait "$server" 2>/dev/null || true
  server=""
}

run_wr() { # run number
  local port=$((20000 + RANDOM % 20000)) t0
  # a server process of its own, as NPtcp's receiver is
  "$wr" serve -B 127.0.0.1 -p "$port" -1 >/dev/null 2>&1 &
  server=$!
  sleep 0.3
  t0=$(now)
  "$wr" sweep 127.0.0.1 -p "$port" --max "$max" --format netpipe --no-store \
    >"$tmp/wr.$1" 2>"$tmp/wr.$1.err" ||
    { echo "wirerate sweep failed:" >&2; cat "$tmp/wr.$1.err" >&2; exit 1; }
  echo "$(now) - $t0" | bc >>"$tmp/wr.wall"
  wait "$server" 2>/dev/null || true
  server=""
}

echo "== sweep 1 B to $max B, $runs runs, NPtcp and wirerate alternating"
for i in $(seq "$runs"); do
  if ((i % 2)); then run_np "$i"; run_wr "$i"; else run_wr "$i"; run_np "$i"; fi
  printf 'run %s: NPtcp %.1f s, wirerate %.1f s\n' "$i" "$(tail -1 "$tmp/np.wall")" "$(tail -1 "$tmp/wr.wall")"
done

python3 - "$tmp" "$runs" <<'EOF'
import math, statistics as st, sys
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

def fit(pts):
    """T = t0 + N/r by least squares weighted 1/T^2 (as wirerate fits): (r bit/s, n_half B, t0 s)."""
    sw = sx = sy = sxx = sxy = 0.0
    for n, t in pts:
        w = 1.0 / (t * t)
        sw += w; sx += w * n; sy += w * t; sxx += w * n * n; sxy += w * n * t
    det = sw * sxx - sx * sx
    if len(pts) < 3 or det == 0:
        return None
    slope = (sw * sxy - sx * sy) / det
    t0 = (sy - slope * sx) / sw
    if slope <= 0 or t0 <= 0:
        return None
    return (8.0 / slope, t0 / slope, t0)

np_runs = [load(f"{tmp}/np.{i}") for i in range(1, runs + 1)]
wr_runs = [load(f"{tmp}/wr.{i}") for i in range(1, runs + 1)]
pairs = [(n, w) for n, w in zip(np_runs, wr_runs) if n and w]
if not pairs:
    sys.exit("no complete runs")
common = sorted(set.intersection(*[set(n) & set(w) for n, w in pairs]))

print(f"\n{'bytes':>9} {'NPtcp Mbps':>12} {'wirerate Mbps':>14} {'ratio':>7}   (medians of {len(pairs)} runs)")
ratio = {}
for b in common:
    ratio[b] = st.median(w[b][0] / n[b][0] for n, w in pairs if n[b][0] > 0)
big = [b for b in common if b >= 1024]
worst = min(big, key=lambda b: ratio[b]) if big else None
for b in common:
    if (b >= 1024 and b & (b - 1) == 0) or b == worst or b == 1:
        mark = "  <- lowest ratio from 1 KiB" if b == worst else ""
        print(f"{b:>9} {st.median(n[b][0] for n, _ in pairs):>12.1f} "
              f"{st.median(w[b][0] for _, w in pairs):>14.1f} {ratio[b]:>7.2f}{mark}")
if big:
    print(f"sizes from 1 KiB: {len(big)}, median ratio {st.median(ratio[b] for b in big):.2f}, "
          f"at or above 0.9: {sum(ratio[b] >= 0.9 for b in big)}")
    low = [f"{b} ({ratio[b]:.2f})" for b in big if ratio[b] < 0.9]
    if low:
        print("below 0.9: " + ", ".join(low))
if 1 in common:
    print(f"1-byte one-way: NPtcp {st.median(n[1][1] for n, _ in pairs)*1e6:.2f} µs, "
          f"wirerate {st.median(w[1][1] for _, w in pairs)*1e6:.2f} µs")

def fits(which):
    out = []
    for n, w in pairs:
        rows = n if which == 0 else w
        f = fit([(b, rows[b][1]) for b in common])
        if f and common[0] <= f[1] <= common[-1]:
            out.append(f)
    return out

print(f"\nHockney fit on best trials ({len(common)} sizes), medians over runs:")
for name, k in (("NPtcp", 0), ("wirerate", 1)):
    fs = fits(k)
    if not fs:
        print(f"{name:>9}: no fit with n½ within the sizes")
        continue
    r, nh, t0 = (st.median(x[i] for x in fs) for i in range(3))
    print(f"{name:>9}: r∞ {r/1e9:7.2f} Gbit/s, n½ {nh:9.0f} B, t0 {t0*1e6:6.2f} µs  ({len(fs)} runs)")
a, b = fits(0), fits(1)
if a and b:
    for i, label in ((0, "r∞"), (1, "n½"), (2, "t0")):
        print(f"  {label} wirerate ÷ NPtcp: {st.median(x[i] for x in b) / st.median(x[i] for x in a):.2f}")

walls = lambda p: [float(x) for x in open(p)]
nw, ww = walls(f"{tmp}/np.wall"), walls(f"{tmp}/wr.wall")
print(f"\nwall time, median: NPtcp {st.median(nw):.1f} s, wirerate {st.median(ww):.1f} s "
      f"(ratio {st.median(ww) / st.median(nw):.2f})")
EOF
