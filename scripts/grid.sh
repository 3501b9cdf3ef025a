#!/usr/bin/env bash
# The grid of signature settings × thresholds behind the defaults (docs/benchmarks/2026-11-27-quality.md).
# Usage: scripts/grid.sh CORPUS [extra eval flags]   — prints one table per setting.
set -euo pipefail
corpus=${1:?usage: scripts/grid.sh CORPUS}; shift || true
bin=${NEARDUP_BIN:-target/release/neardup}
run() { echo "## $*"; "$bin" eval --corpus "$corpus" --method spotsigs --threshold 0.4,0.5,0.6 "$@" 2>/dev/null | tail -n +2; }
run "$@"
run --chain-len 1 "$@"
run --chain-len 3 "$@"
run --spot-distance 2 "$@"
run --stem false "$@"
run --antecedents a,an,the "$@"
run --antecedents a,an,the,is,was,are,were,be,been,has,have,had,will,would,said,that,this "$@"
run --max-link-density 1.0 "$@"
run --content all "$@"
run --measure weighted "$@"
run --min-signatures 5 "$@"
