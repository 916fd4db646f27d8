#!/usr/bin/env bash
# A flood of silent connections against `wirerate serve` on loopback: 1000 connections from
# 125 addresses (8 each, the per-address limit) that say nothing, held for 15 s; meanwhile
# 20 quick tests from another address. Prints how many of those were served and the
# server's threads. Run it once with the default --max-startups and once with
# MAX_STARTUPS=1000 (refuse only at the cap, as before random early drop).
#
# LOGIN=1: the connections log in instead and stop half-way: each completes its TLS handshake
# with `serve --tls --users`, sends its preamble and SCRAM's first message, reads the
# challenge, and says nothing more. Prints how many got that far and the server's threads
# and resident memory while they are held, against its resident memory before.
#
#   bench/pending_flood.sh            # WIRERATE=path/to/wirerate to pick a build
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${WIRERATE:-target/release/wirerate}
port=${PORT:-47912}
tmp=$(mktemp -d)
login=()
if [ -n "${LOGIN:-}" ]; then
  WIRERATE_PASSWORD=secret "$bin" user add alice --users "$tmp/users" --iterations 4096 >/dev/null 2>&1
  login=(--tls --users "$tmp/users")
fi
XDG_DATA_HOME=$tmp "$bin" serve -B 127.0.0.1 -p "$port" --handshake-timeout 20 --idle-timeout 30 \
  ${MAX_STARTUPS:+--max-startups "$MAX_STARTUPS"} "${login[@]}" 2>/dev/null &
server=$!
trap 'kill "$server" 2>/dev/null || true; rm -rf "$tmp"' EXIT
sleep 1.5
kill -0 "$server" 2>/dev/null || { echo "the server did not start (port $port in use?)"; exit 1; }
rss() { grep VmRSS "/proc/$server/status" | tr -s '\t ' ' '; }
if [ -n "${LOGIN:-}" ]; then
  before=$(rss)
  python3 - "$port" "$tmp/ready" <<'PY' &
import json, os, socket, ssl, struct, sys, time
port = int(sys.argv[1])
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
ctx.minimum_version = ssl.TLSVersion.TLSv1_3
def pre(channel):
    return b"WRRT" + struct.pack(">HBB", 1, channel, 0)
def frame(msg):
    body = json.dumps(msg).encode()
    return struct.pack(">I", len(body)) + body
held, challenged = [], 0
for i in range(1000):
    src = "127.1.%d.%d" % (i // 8 // 250, (i // 8) % 250 + 1)
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(src, 0))
        s.sendall(pre(2))
        if len(s.recv(8)) != 8:
            continue
        t = ctx.wrap_socket(s)
        nonce = os.urandom(12).hex()
        t.sendall(pre(0) + frame({"type": "login", "scram": "p=tls-exporter,,n=alice,r=" + nonce}))
        got = b""
        while b"login_challenge" not in got:
            b = t.recv(4096)
            if not b:
                break
            got += b
        if b"login_challenge" in got:
            challenged += 1
            held.append(t)
    except OSError:
        pass
print("%d of 1000 connections stopped after the login challenge" % challenged, flush=True)
open(sys.argv[2], "w").close()
time.sleep(15)
PY
  flood=$!
  for _ in $(seq 1 600); do [ -e "$tmp/ready" ] && break; sleep 0.1; done
  sleep 1
  echo "server before: $before; while they are held: $(grep Threads /proc/$server/status | tr -s '\t ' ' '), $(rss)"
  wait "$flood"
  exit 0
fi
python3 - "$port" <<'PY' &
import socket, sys, time
port = int(sys.argv[1])
held = []
for i in range(1000):
    src = "127.1.%d.%d" % (i // 8 // 250, (i // 8) % 250 + 1)
    try:
        s = socket.socket()
        s.bind((src, 0))
        s.connect(("127.0.0.1", port))
        held.append(s)
    except OSError:
        pass
time.sleep(15)
PY
flood=$!
sleep 4
served=0
for _ in $(seq 1 20); do
  if timeout 10 "$bin" run 127.0.0.1 -p "$port" -B 127.0.0.2 -n 1M >/dev/null 2>&1; then
    served=$((served + 1))
  fi
done
echo "served $served/20 during the flood; server $(grep Threads /proc/$server/status | tr -s '\t ' ' ')"
wait "$flood"
