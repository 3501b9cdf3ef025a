#!/usr/bin/env bash
# Installs the system packages the build and the tests need (idempotent).
#
#   bash scripts/install-deps.sh           # what the build and the tests need
#   bash scripts/install-deps.sh --build   # what the build alone needs (the README's first command)
set -euo pipefail

build_only=0
case "${1:-}" in
  --build) build_only=1 ;;
  "") ;;
  *) echo "usage: bash scripts/install-deps.sh [--build]" >&2; exit 2 ;;
esac

need=()
# librocksdb-sys generates its bindings with libclang; a C++ compiler builds RocksDB.
dpkg -s libclang-dev >/dev/null 2>&1 || need+=(libclang-dev)
command -v g++ >/dev/null 2>&1 || need+=(g++)
command -v make >/dev/null 2>&1 || need+=(make)
# librdkafka is built with TLS against the system's OpenSSL, found by pkg-config, and with
# the system's libcurl for SASL OAUTHBEARER with OpenID Connect (managed Kafka services)
dpkg -s libssl-dev >/dev/null 2>&1 || need+=(libssl-dev)
dpkg -s libcurl4-openssl-dev >/dev/null 2>&1 || need+=(libcurl4-openssl-dev)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
if [ "$build_only" -eq 0 ]; then
  # the broker tests: Apache Kafka runs on Java and its jars come from Maven Central with
  # Maven; openssl makes the TLS test's certificates; python3 runs the chart and hostile-input
  # checks
  command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
  command -v mvn >/dev/null 2>&1 || need+=(maven)
  command -v python3 >/dev/null 2>&1 || need+=(python3)
  command -v openssl >/dev/null 2>&1 || need+=(openssl)
  # the eval report test renders the report in a headless browser
  command -v chromium >/dev/null 2>&1 || need+=(chromium)
fi
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
fi
[ "$build_only" -eq 0 ] || exit 0
rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy

# The broker tests run against Apache Kafka (scripts/kafka-broker.sh starts one per test): its
# jars, once, into a cache keyed by the hash of scripts/kafka/pom.xml (about 45 MB, 30 s).
here="$(cd "$(dirname "$0")" && pwd)"
libs="${NEARDUP_KAFKA_LIBS:-$HOME/.cache/neardup-kafka/$(sha256sum "$here/kafka/pom.xml" | cut -c1-16)/libs}"
if [ ! -f "$libs/.complete" ]; then
  rm -rf "$libs"
  mvn -q -B -f "$here/kafka/pom.xml" dependency:copy-dependencies \
    -DoutputDirectory="$libs" -DincludeScope=runtime
  touch "$libs/.complete"
fi
