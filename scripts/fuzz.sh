#!/usr/bin/env bash
# Mutation fuzzing on the stable toolchain: each target (page: decode → strip → sign →
# fingerprint; doc: the index's document record decoding) for NEARDUP_FUZZ_SECONDS (default
# 600) seconds. An input that panics is kept under tests/data/fuzz/ and replayed by the
# default suite from then on.
set -euo pipefail
cd "$(dirname "$0")/.."
export NEARDUP_FUZZ_SECONDS="${NEARDUP_FUZZ_SECONDS:-600}"
for target in page doc; do
  NEARDUP_FUZZ_TARGET=$target cargo test --release --test fuzz -- --ignored --nocapture fuzz_for_a_while
done
