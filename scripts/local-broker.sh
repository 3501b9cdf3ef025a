#!/usr/bin/env bash
# Starts an Apache Kafka broker in the background for benchmarks and manual runs, the way the
# broker tests start theirs (scripts/kafka-broker.sh): data, configuration and log in DIR
# (default ./local-broker), listening on 127.0.0.1:PORT (default 9092), its controller on
# PORT+1. Prints the broker's process id once it answers; stop it with `kill PID`.
#
#   bash scripts/local-broker.sh [DIR] [PORT]
set -euo pipefail
dir="${1:-local-broker}"
port="${2:-9092}"
cport=$((port + 1))
here="$(cd "$(dirname "$0")" && pwd)"
for p in "$port" "$cport"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
    echo "port $p is taken" >&2
    exit 1
  fi
done
mkdir -p "$dir"
bash "$here/kafka-broker.sh" "$dir" "$port" "$cport" >"$dir/stdout.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null' ERR
up=0
for _ in $(seq 600); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then up=1; break; fi
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if [ "$up" != 1 ]; then
  echo "the broker did not start (see $dir/broker.log and $dir/stdout.log)" >&2
  kill "$pid" 2>/dev/null || true
  exit 1
fi
echo "$pid"
