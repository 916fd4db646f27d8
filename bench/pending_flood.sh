#!/usr/bin/env bash
# A flood of silent connections against `wirerate serve` on loopback: 1000 connections from
# 125 addresses (8 each, the per-address limit) that say nothing, held for 15 s; meanwhile
# 20 quick tests from another address. Prints how many of those were served and the
# server's threads. Run it once with the default --max-startups and once with
# MAX_STARTUPS=1000 (refuse only at the cap, as before random early drop).
#
#   bench/pending_flood.sh            # WIRERATE=path/to/wirerate to pick a build
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${WIRERATE:-target/release/wirerate}
port=${PORT:-47912}
"$bin" serve -B 127.0.0.1 -p "$port" --handshake-timeout 20 --idle-timeout 30 \
  ${MAX_STARTUPS:+--max-startups "$MAX_STARTUPS"} 2>/dev/null &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
sleep 1.5
kill -0 "$server" 2>/dev/null || { echo "the server did not start (port $port in use?)"; exit 1; }
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
