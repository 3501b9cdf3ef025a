#!/usr/bin/env bash
# Kill test: 20 times, SIGKILL the Kafka stage at a random moment of a 10,000-record run
# against a real broker and start it again; then check that nothing was lost, repeats are
# byte-identical, the decisions equal an uninterrupted run and the index opened every time.
# Then the group test of the suite on a longer run: its 20 kills during joins, rebalances and
# batches (two members for part of it) and NEARDUP_GROUP_EXTRA_KILLS more mid-batch (default
# 40 here). Both run at the default session settings. Takes about fifteen minutes.
# NEARDUP_KILLS=N changes the number of kills of the first.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cargo test --release --test reliability -- --ignored --nocapture kill_twenty_times
NEARDUP_GROUP_EXTRA_KILLS="${NEARDUP_GROUP_EXTRA_KILLS:-40}" \
  cargo test --release --test group -- --nocapture twenty_kills
