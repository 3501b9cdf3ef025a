#!/usr/bin/env bash
# Installs the system packages the build and the tests need (idempotent).
set -euo pipefail

need=()
# librocksdb-sys generates its bindings with libclang; a C++ compiler builds RocksDB.
dpkg -s libclang-dev >/dev/null 2>&1 || need+=(libclang-dev)
command -v g++ >/dev/null 2>&1 || need+=(g++)
command -v make >/dev/null 2>&1 || need+=(make)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
fi
rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy

# The broker tests run against a real Kafka-protocol broker: tansu with SQLite storage,
# built with cargo (about 20 minutes on two cores the first time; skipped when installed).
if ! tansu --version >/dev/null 2>&1 && ! "$HOME/.cargo/bin/tansu" --version >/dev/null 2>&1; then
  cargo install tansu@0.6.0 --locked --features libsql
fi
