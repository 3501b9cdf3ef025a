#!/usr/bin/env bash
# Soak through the Kafka stage: NEARDUP_SOAK_RECORDS (default 1,000,000) generated records
# through `neardup run` against a real broker with a 7-day retention window; prints the
# memory, throughput and index-size curve and checks it (tests/reliability.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
exec cargo test --release --test reliability -- --ignored --nocapture soak_through_the_stage
