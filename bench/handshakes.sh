#!/usr/bin/env bash
# Logins per second on `serve --tls --users`: a TLS 1.3 handshake and a SCRAM-SHA-256
# exchange each, one after another, client and server on one host (in one process), at
# SCRAM's minimum of 4096 iterations and at the default of `wirerate user add`. Also the
# client's key stretching alone, which is what the iteration count costs: the server does
# no PBKDF2 at a login, only a few HMACs.
#
#   bench/handshakes.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --release --quiet -p wirerate-server --lib login_handshakes_per_second \
  -- --ignored --nocapture 2>&1 | grep -E 'logins/s|TLS handshakes/s'
cargo test --release --quiet -p wirerate-control --lib handshakes_per_second \
  -- --ignored --nocapture --exact tls::tests::handshakes_per_second 2>&1 | grep -E 'handshakes/s'
