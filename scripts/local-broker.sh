#!/usr/bin/env bash
# Starts the local test broker for benchmarks and manual runs, the way the broker tests start
# theirs: SQLite storage in DIR (default ./local-broker), listening and advertised on
# 127.0.0.1:PORT (default 9092), with an index on its record headers (without it every fetch
# reads every header ever written, so reads slow down as outputs accumulate). Prints the
# broker's process id; stop it with `kill PID`.
#
#   bash scripts/local-broker.sh [DIR] [PORT]
set -euo pipefail
dir="${1:-local-broker}"
port="${2:-9092}"
broker="$(command -v tansu || echo "$HOME/.cargo/bin/tansu")"
[ -x "$broker" ] || { echo "no broker: run scripts/install-deps.sh" >&2; exit 1; }
if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
  echo "port $port is taken" >&2
  exit 1
fi
mkdir -p "$dir"
cd "$dir"
"$broker" broker --listener-url "tcp://127.0.0.1:$port" \
  --advertised-listener-url "tcp://127.0.0.1:$port" \
  --storage-engine sqlite://tansu.db >broker.log 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null' ERR
up=0
for _ in $(seq 200); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then up=1; break; fi
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if [ "$up" != 1 ]; then
  echo "the broker did not start (see $dir/broker.log)" >&2
  kill "$pid" 2>/dev/null || true
  exit 1
fi
python3 - tansu.db <<'PY'
import sqlite3, sys, time
for _ in range(100):
    try:
        c = sqlite3.connect(sys.argv[1], timeout=5)
        c.execute("create index if not exists header_record on header (topition, offset_id)")
        c.commit()
        break
    except sqlite3.OperationalError:
        time.sleep(0.1)
else:
    sys.exit("cannot index the broker's record headers")
PY
echo "$pid"
