#!/usr/bin/env bash
# Coverage-guided fuzzing with cargo fuzz (libFuzzer): the targets in fuzz/ (page: decode →
# strip → sign → fingerprint; doc: the index's document records; index: arbitrary keys and
# values in every column family under every read path; strip: the byte scanner against
# html5ever's tokenizer, which must agree exactly), each for NEARDUP_FUZZ_SECONDS
# (default 600) seconds; NEARDUP_FUZZ_TARGETS picks some ("page doc index strip" by default). An
# input that takes over 10 s (slow paths are defects here) or 4 GiB counts as a crash.
# The corpus grows in fuzz/corpus/<target> (page and index seeded as tests/fuzz.rs seeds them;
# doc starts empty and finds the record layout within seconds). A crashing
# input is copied to tests/data/fuzz/<target>-<crc>.bin, which the default suite replays
# (tests/fuzz.rs), and the script fails.
#
# cargo fuzz needs unstable compiler flags: a nightly toolchain when one is installed, else
# the stable one with RUSTC_BOOTSTRAP=1. The targets run without AddressSanitizer: built with
# it, the bundled C libraries' build scripts cannot link their configuration probes; the
# Rust code keeps its bounds and overflow checks (debug assertions on). The first build
# compiles RocksDB and librdkafka again with coverage flags: about 20 minutes on 2 cores. NEARDUP_FUZZ_STABLE=1 runs the plain mutation
# fuzzer of tests/fuzz.rs instead (no coverage guidance, no extra tools).
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${NEARDUP_FUZZ_SECONDS:-600}"
targets="${NEARDUP_FUZZ_TARGETS:-page doc index strip}"

if [ "${NEARDUP_FUZZ_STABLE:-0}" = 1 ]; then
  for t in $targets; do
    NEARDUP_FUZZ_SECONDS=$secs NEARDUP_FUZZ_TARGET=$t \
      cargo test --release --test fuzz -- --ignored --nocapture fuzz_for_a_while
  done
  exit 0
fi

command -v python3 >/dev/null 2>&1 || { echo "python3 is needed (scripts/install-deps.sh)" >&2; exit 1; }
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
if rustup run nightly rustc --version >/dev/null 2>&1; then
  fuzz=(cargo +nightly fuzz)
else
  export RUSTC_BOOTSTRAP=1
  fuzz=(cargo fuzz)
fi

# seeds: the example records and the fixture pages as records
mkdir -p fuzz/corpus/page fuzz/corpus/doc fuzz/corpus/index fuzz/corpus/strip
python3 - <<'PY'
import json, pathlib, zlib
out = pathlib.Path("fuzz/corpus/page")
lines = []
for f in ["examples/pages.jsonl", "examples/bad.jsonl"]:
    lines += [l for l in pathlib.Path(f).read_bytes().split(b"\n") if l]
for p in sorted(pathlib.Path("tests/data").glob("*.html")):
    lines.append(json.dumps({"url": "https://f.test/", "html": p.read_text()}).encode())
for l in lines:
    (out / f"seed-{zlib.crc32(l):08x}").write_bytes(l)
# strip: the same pages as bare HTML
for l in lines:
    try:
        html = json.loads(l).get("html")
    except (ValueError, AttributeError):
        continue
    if isinstance(html, str):
        b = html.encode()
        (pathlib.Path("fuzz/corpus/strip") / f"seed-{zlib.crc32(b):08x}").write_bytes(b)
# index: each method, with an entry of a plausible key length in each column family
# (method, then family, key length, value length, key, value), as tests/fuzz.rs seeds it
out = pathlib.Path("fuzz/corpus/index")
for method in range(4):
    for family, key_len in [(0, 8), (1, 8), (2, 12), (3, 18), (4, 16), (5, 16), (6, 8)]:
        seed = bytes([method, family, key_len, 8]) + bytes((i * 37) % 256 for i in range(key_len))
        seed += bytes([0, 0, 0, 0, 0, 0, 0, 1])
        (out / f"seed-{zlib.crc32(seed):08x}").write_bytes(seed)
PY

failed=0
for t in $targets; do
  echo "== cargo fuzz run $t for $secs s"
  rm -rf "fuzz/artifacts/$t"
  status=0
  "${fuzz[@]}" run --sanitizer none "$t" "fuzz/corpus/$t" -- -max_total_time="$secs" -max_len=262144 \
    -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 >"fuzz/$t.log" 2>&1 || status=$?
  grep -E '^#[0-9]+.*(DONE|pulse)|ERROR|SUMMARY|stat::' "fuzz/$t.log" | tail -8 || true
  [ "$status" -eq 0 ] || { echo "cargo fuzz run $t: exit $status (fuzz/$t.log)" >&2; failed=1; }
  for a in fuzz/artifacts/"$t"/crash-* fuzz/artifacts/"$t"/oom-* fuzz/artifacts/"$t"/timeout-*; do
    [ -e "$a" ] || continue
    mkdir -p tests/data/fuzz
    cp "$a" "tests/data/fuzz/$t-$(cksum <"$a" | cut -d' ' -f1).bin"
    echo "kept $a as a regression input" >&2
    failed=1
  done
done
exit $failed
