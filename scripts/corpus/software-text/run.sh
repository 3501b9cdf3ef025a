#!/usr/bin/env bash
# Software text across hosts: regenerate every input from the two corpora and print the
# baseline, S0, S1 and S2F rows for each (see README.md).
#
# Usage: bash scripts/corpus/software-text/run.sh NEARDUP_BINARY DEV_CORPUS WEBDUP_CORPUS WORKDIR
#
# WORKDIR/<corpus>/ receives the signatures, page metadata, blocks, software blocks and the
# by-kind table of each row (rows_<corpus>.txt). Needs Python 3 and the HTML parser package
# pages.py imports.
set -euo pipefail

if [ "$#" -ne 4 ]; then
  sed -n '5p' "$0" | sed 's/^# //' >&2
  exit 2
fi
bin=$1; dev=$2; webdup=$3; work=$4
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
max_words=20
hosts=3

[ -x "$bin" ] || { echo "not an executable: $bin" >&2; exit 1; }
for c in "$dev" "$webdup"; do [ -f "$c" ] || { echo "no such corpus: $c" >&2; exit 1; }; done
python3 -c 'import lxml.html' || { echo "python3 cannot import the HTML parser pages.py needs" >&2; exit 1; }

# The default configuration only: no config file or setting from the environment.
for v in $(compgen -e | grep '^NEARDUP_' || true); do unset "$v"; done

# sign INPUT OUT_PREFIX: the three whole-text signings the signals need.
sign_all() {
  "$bin" sign --input "$1" --strings --content all --short-below 1000000000 > "$2_words.jsonl"
  "$bin" sign --input "$1" --strings --content all --short-shingle 0 > "$2_spotsigs.jsonl"
  "$bin" sign --input "$1" --strings --content all > "$2_default.jsonl"
}

start=$SECONDS
for pair in "webdup=$webdup" "dev=$dev"; do
  name=${pair%%=*}; corpus=${pair#*=}; d=$work/$name
  mkdir -p "$d"
  echo "== $name: signing ($corpus)" >&2
  "$bin" sign --input "$corpus" --strings > "$d/sign.jsonl"    # the signed set, as decided
  sign_all "$corpus" "$d/all"                                  # the whole page (S0, S1)
  echo "== $name: blocks" >&2
  python3 "$here/pages.py" "$corpus" "$d" --max-words "$max_words"
  python3 "$here/software_blocks.py" "$d" --hosts "$hosts" --max-words "$max_words" >&2
  sign_all "$d/software_texts.jsonl" "$d/block_sigs"          # each software block's text (S2)
done
echo "== rows" >&2
python3 "$here/signals.py" "webdup=$work/webdup" "dev=$work/dev"
echo "== done in $((SECONDS - start)) s" >&2
