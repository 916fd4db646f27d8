#!/usr/bin/env bash
# Slow TLS hellos against `wirerate serve --tls --users` on loopback: 1000 connections from
# 125 addresses (8 each, the per-address limit) each send a ClientHello a byte every GAP
# seconds, and open a new connection as soon as the server closes one, for 40 s; meanwhile
# 29 logins (`run --tls --user`) from another address, one after another. Prints how long
# the server held each slow hello it closed, how many logins succeeded, and the server's
# threads and resident memory during the flood against before.
#
#   bench/slow_hellos.sh            # WIRERATE=path/to/wirerate, GAP=seconds (default 0.1)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${WIRERATE:-target/release/wirerate}
port=${PORT:-47913}
gap=${GAP:-0.1}
tmp=$(mktemp -d)
WIRERATE_PASSWORD=secret "$bin" user add alice --users "$tmp/users" --iterations 4096 >/dev/null 2>&1
XDG_DATA_HOME=$tmp "$bin" serve -B 127.0.0.1 -p "$port" --tls --users "$tmp/users" \
  --state-dir "$tmp" 2>/dev/null &
server=$!
trap 'kill "$server" 2>/dev/null || true; rm -rf "$tmp"' EXIT
sleep 1.5
kill -0 "$server" 2>/dev/null || { echo "the server did not start (port $port in use?)"; exit 1; }
mem() { grep -E 'VmRSS|Threads' "/proc/$server/status" | tr -s '\t ' ' ' | paste -sd, -; }
before=$(mem)
python3 - "$port" 40 "$gap" <<'PY' &
import select, socket, ssl, struct, sys, time
port, duration, gap = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
hello_in, hello_out = ssl.MemoryBIO(), ssl.MemoryBIO()
try:
    ctx.wrap_bio(hello_in, hello_out).do_handshake()
except ssl.SSLWantReadError:
    pass
hello = hello_out.read()
preamble = b"WRRT" + struct.pack(">HBB", 1, 2, 0)
conns, lasted = {}, []
def connect(i):
    src = "127.1.%d.%d" % (i // 8 // 250, (i // 8) % 250 + 1)
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=2, source_address=(src, 0))
        s.sendall(preamble)
        s.setblocking(False)
        conns[s] = [i, time.time(), 0]
    except OSError:
        pass
for i in range(1000):
    connect(i)
end, next_byte = time.time() + duration, time.time()
while time.time() < end:
    readable, _, _ = select.select(list(conns), [], [], 0.02)
    for s in readable:
        try:
            b = s.recv(4096)
        except OSError:
            b = b""
        if not b:
            i, t0, _ = conns.pop(s)
            lasted.append(time.time() - t0)
            s.close()
            connect(i)
    if time.time() >= next_byte:
        next_byte += gap
        for s, c in list(conns.items()):
            if c[2] < len(hello):
                try:
                    s.send(hello[c[2] : c[2] + 1])
                    c[2] += 1
                except OSError:
                    pass
held = sorted(t for t in lasted if t >= 1.0)
print("slow hellos: %d refused at once, %d held and closed by the server (median %.2f s, max %.2f s)"
      % (len(lasted) - len(held), len(held), held[len(held) // 2] if held else 0, held[-1] if held else 0))
PY
flood=$!
sleep 5
during=$(mem)
ok=0
for _ in $(seq 1 29); do
  if WIRERATE_PASSWORD=secret timeout 20 "$bin" run 127.0.0.1 -p "$port" --tls --user alice \
    --known-servers "$tmp/known" -n 1M >/dev/null 2>&1; then
    ok=$((ok + 1))
  fi
done
echo "logins from another address: $ok/29 succeeded; server before: $before; during: $during"
wait "$flood"
