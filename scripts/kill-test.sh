#!/usr/bin/env bash
# Kill test: 20 times, SIGKILL the Kafka stage at a random moment of a 10,000-record run
# against a real broker and start it again; then check that nothing was lost, repeats are
# byte-identical, the decisions equal an uninterrupted run and the index opened every time.
# Takes about five minutes. NEARDUP_KILLS=N changes the number of kills.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
exec cargo test --release --test reliability -- --ignored --nocapture kill_twenty_times
