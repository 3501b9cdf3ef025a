#!/usr/bin/env bash
# Hostile input through `neardup dedup`: nothing lost, nothing fatal, memory bounded.
#
# Generates the hostile corpus (scripts/gen-hostile.py: broken and wrong-shaped JSON, bytes
# that are not UTF-8, NUL bytes, a 50 MB page, 10,000-deep nesting, 1 million attributes,
# every HTML entity, ...) into a temporary directory, runs `neardup dedup` over it with a
# fresh index and separate unique / duplicates / dead-letter outputs, and asserts:
#   - the exit code is 0, no panic on stderr, and the run ends within HOSTILE_TIMEOUT;
#   - every input line is accounted for exactly once: lines = tagged records + dead letters
#     + blank lines, by the summary JSON, by counting the output lines, and line by line
#     (a dead letter names its line and carries its original bytes; every other non-blank
#     line has the tagged record of its id);
#   - every dead letter has a reason of the schema and a non-empty detail;
#   - every tagged record has the decision unique or skipped (unique output) or duplicate
#     (duplicates output);
#   - every category yields what the corpus sidecar says it should;
#   - the peak resident memory stays under RSS_LIMIT (below), derived from the record limit.
# Pass 2 streams one line far longer than the record limit: a too_large dead letter, and
# memory under the same limit.
# Prints a summary table and exits non-zero on any failed assertion.
#
# Usage: scripts/check-hostile.sh [--per-category] [extra dedup flags, e.g. --strip tree]
#   --per-category  also run every category on its own (fresh index each) and print the
#                   wall time and peak memory of each, slowest first
# Environment:
#   NEARDUP_BIN       binary (default ${CARGO_TARGET_DIR:-target}/release/neardup)
#   HOSTILE_COUNT     corpus lines (default 1500)      HOSTILE_SEED  corpus seed
#   HOSTILE_SKIP      comma-separated categories to leave out of the corpus (default none)
#   HOSTILE_TIMEOUT   seconds before a run counts as hung and is killed (default 300; a
#                     healthy run of the default corpus takes under 10 s on two cores)
#   HOSTILE_OVERSIZE_MIB  length of the pass-2 line in MiB (default 256; 0 skips pass 2)
#   HOSTILE_RSS=proc  poll VmHWM even where /usr/bin/time -v works
#   HOSTILE_KEEP=1    keep the temporary directory (corpus, outputs) and print its path
set -euo pipefail
cd "$(dirname "$0")/.."

per_category=0
if [ "${1:-}" = "--per-category" ]; then
  per_category=1
  shift
fi
extra=("$@")
bin=${NEARDUP_BIN:-${CARGO_TARGET_DIR:-target}/release/neardup}
count=${HOSTILE_COUNT:-1500}
seed=${HOSTILE_SEED:-neardup-hostile-1}
timeout_s=${HOSTILE_TIMEOUT:-300}
[ -x "$bin" ] || { echo "check-hostile: no binary at $bin (set NEARDUP_BIN)" >&2; exit 2; }

# The memory limit. Records up to MAX_RECORD bytes are read whole; a record is held as its
# line, as the decoded page and (its first --max-page-bytes) as stripped text and tokens,
# and up to four batches (32 MiB of lines, or one larger line) are in flight between the
# reader, the signing pool and the writer. Measured with 64 MiB records on two cores: the
# 50 MB page alone 207 MiB; the whole corpus 260-330 MiB; eight records of 63.5 MB in a row
# (the worst case the record limit lets through) 264 MiB. The limit allows RSS_BASE_MIB for
# the index, the allocator and the threads plus RSS_FACTOR times the record limit: 512 MiB,
# about 1.6 times the highest figure measured.
MAX_RECORD=$((64 << 20))
RSS_BASE_MIB=${HOSTILE_RSS_BASE_MIB:-128}
RSS_FACTOR=${HOSTILE_RSS_FACTOR:-6}
RSS_LIMIT_KB=$(( (RSS_BASE_MIB << 10) + RSS_FACTOR * MAX_RECORD / 1024 ))

work=$(mktemp -d "${TMPDIR:-/tmp}/neardup-hostile.XXXXXX")
if [ "${HOSTILE_KEEP:-0}" = 1 ]; then
  echo "check-hostile: keeping $work" >&2
else
  trap 'rm -rf "$work"' EXIT
fi

# Peak RSS: /usr/bin/time -v where it works, otherwise VmHWM polled from /proc every 50 ms
# (a lower bound for runs shorter than that).
time_probe=$( { /usr/bin/time -v true; } 2>&1 || true)
if [[ $time_probe == *"Maximum resident set size"* ]] && [ "${HOSTILE_RSS:-}" != proc ]; then
  rss_how="/usr/bin/time -v"
else
  rss_how="VmHWM polled from /proc"
fi

# run_dedup INPUT DIR: runs the binary; sets rc, wall_s, rss_kb, timed_out.
run_dedup() {
  local input=$1 dir=$2
  mkdir -p "$dir"
  local cmd=("$bin" dedup --input "$input" --index "$dir/index" --unique "$dir/unique.jsonl"
    --duplicates "$dir/duplicates.jsonl" --dead-letter "$dir/dead-letter.jsonl"
    --max-record-bytes "$MAX_RECORD" --summary-json ${extra[@]+"${extra[@]}"})
  local t0 t1 pid now v
  t0=$(date +%s%N)
  set -m # own process group, so a hung run can be killed with everything it started
  if [ "$rss_how" = "/usr/bin/time -v" ]; then
    /usr/bin/time -v -o "$dir/time.txt" "${cmd[@]}" >"$dir/summary.json" 2>"$dir/stderr.txt" &
  else
    "${cmd[@]}" >"$dir/summary.json" 2>"$dir/stderr.txt" &
  fi
  pid=$!
  set +m
  rss_kb=0
  timed_out=0
  local watch=$pid
  while kill -0 "$pid" 2>/dev/null; do
    # VmHWM is polled in both modes: it is the only figure left when a hung run is killed
    if [ "$rss_how" = "/usr/bin/time -v" ] && [ "$watch" = "$pid" ]; then
      watch=$(awk '{ print $1 }' "/proc/$pid/task/$pid/children" 2>/dev/null || true)
      watch=${watch:-$pid}
    fi
    v=$(awk '/^VmHWM:/ { print $2 }' "/proc/$watch/status" 2>/dev/null || true)
    if [ -n "$v" ] && [ "$v" -gt "$rss_kb" ]; then rss_kb=$v; fi
    now=$(date +%s%N)
    if [ $(( (now - t0) / 1000000000 )) -ge "$timeout_s" ]; then
      timed_out=1
      kill -KILL -- "-$pid" 2>/dev/null || true
      break
    fi
    sleep 0.05
  done
  rc=0
  wait "$pid" || rc=$?
  t1=$(date +%s%N)
  wall_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
  if [ "$rss_how" = "/usr/bin/time -v" ] && [ -f "$dir/time.txt" ]; then
    v=$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$dir/time.txt")
    if [ -n "$v" ] && [ "$v" -gt "$rss_kb" ]; then rss_kb=$v; fi
    # its wall clock is finer than the 50 ms of the polling loop
    v=$(awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, p, ":"); s = 0
          for (i = 1; i <= n; i++) s = s * 60 + p[i]; printf "%.2f", s }' "$dir/time.txt")
    if [ -n "$v" ]; then wall_s=$v; fi
  fi
}

corpus=$work/hostile.jsonl
split_args=()
[ "$per_category" = 1 ] && split_args=(--split-dir "$work/by-category")
python3 scripts/gen-hostile.py --out "$corpus" --count "$count" --seed "$seed" \
  --skip "${HOSTILE_SKIP:-}" ${split_args[@]+"${split_args[@]}"}

echo "check-hostile: running $bin dedup over $count lines (timeout ${timeout_s} s)" >&2
run_dedup "$corpus" "$work/run"

# check RUN_DIR INPUT [CATEGORY [quiet]]: the assertions and the table (Python below).
check() {
  python3 "$work/check.py" "$2" "$corpus.expect.json" "$1" "$rc" "$wall_s" "$rss_kb" "$RSS_LIMIT_KB" \
    "$rss_how" "$timed_out" "$MAX_RECORD" "$RSS_BASE_MIB" "$RSS_FACTOR" "${3:-}" "${4:-}"
}
cat >"$work/check.py" <<'PY'
import base64, collections, json, re, sys, threading
from pathlib import Path

# The corpus nests JSON 10,000 deep and has numbers of 5,000 digits: parse with a deep stack.
sys.setrecursionlimit(1_000_000)
sys.set_int_max_str_digits(0)
threading.stack_size(1 << 29)

def main():
    (corpus, expect_path, run_dir, rc, wall, rss_kb, rss_limit_kb, rss_how, timed_out, max_record,
     rss_base, rss_factor, only_category, quiet) = sys.argv[1:15]
    rc, rss_kb, rss_limit_kb, max_record = int(rc), int(rss_kb), int(rss_limit_kb), int(max_record)
    run = Path(run_dir)
    fails = []

    def fail(msg):
        fails.append(msg)

    REASONS = {"not_utf8", "invalid_json", "truncated_json", "wrong_shape", "missing_url", "empty_url",
               "invalid_fetched_at", "too_large"}
    FP = re.compile(r"^([0-9a-f]{16}){1,4}$")
    ASCII_WS = set(b" \t\n\x0c\r")  # what the reader counts as a blank line

    def url_id(url):  # FNV-1a 64 of the URL, as record.rs names a page without an id
        h = 0xCBF29CE484222325
        for b in url.encode("utf-8", "surrogatepass"):
            h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
        return f"url-{h:016x}"

    expect = json.loads(Path(expect_path).read_text())
    data = Path(corpus).read_bytes()
    # split as the reader does: on \n only, one \r before a \n dropped, a last line without \n kept
    lines = data.split(b"\n") if data else []
    last = lines.pop() if lines and not data.endswith(b"\n") else None
    if data.endswith(b"\n"):
        lines.pop()
    lines = [l[:-1] if l.endswith(b"\r") else l for l in lines] + ([last] if last is not None else [])
    n = len(lines)
    cats = [only_category] * n if only_category else expect["line_categories"]
    if not only_category and expect["lines"] != n:
        fail(f"the sidecar says {expect['lines']} lines, the corpus has {n}")

    if timed_out == "1":
        fail(f"the run did not finish in time and was killed after {wall} s")
    if rc != 0:
        fail(f"exit code {rc}")
    stderr = (run / "stderr.txt").read_text(errors="replace") if (run / "stderr.txt").exists() else ""
    if "panicked" in stderr or "overflowed its stack" in stderr:
        fail("a panic on stderr: " + stderr.strip()[-500:])

    summary = {}
    try:
        summary = json.loads((run / "summary.json").read_text().strip().splitlines()[-1])
    except Exception as e:  # noqa: BLE001
        fail(f"no summary JSON on stdout ({e})")

    def jsonl(path):
        if not path.exists():
            return []
        out = []
        raw_lines = path.read_bytes().split(b"\n")
        if raw_lines[-1] == b"":
            raw_lines.pop()
        for k, raw in enumerate(raw_lines, 1):
            try:
                out.append(json.loads(raw))
            except ValueError as e:
                if not (timed_out == "1" and k == len(raw_lines)):  # a kill can cut the last line
                    fail(f"{path.name} line {k} is not JSON: {e}")
        return out

    dead = jsonl(run / "dead-letter.jsonl")
    unique_out = jsonl(run / "unique.jsonl")
    dup_out = jsonl(run / "duplicates.jsonl")

    # dead letters: schema, reason, detail, source line, original bytes
    dead_by_line = {}
    for d in dead:
        line = d.get("source", {}).get("line")
        where = f"dead letter for line {line}"
        if d.get("schema") != "neardup.dead-letter.v1":
            fail(f"{where}: schema {d.get('schema')!r}")
        if d.get("reason") not in REASONS:
            fail(f"{where}: reason {d.get('reason')!r} is not one of the schema")
        if not isinstance(d.get("detail"), str) or not d["detail"].strip():
            fail(f"{where}: empty detail")
        src = d.get("source", {})
        if src.get("kind") != "file" or src.get("path") != corpus:
            fail(f"{where}: source {src!r}")
        if not isinstance(line, int) or not 1 <= line <= n:
            fail(f"{where}: no such input line")
            continue
        if line in dead_by_line:
            fail(f"line {line} has two dead letters")
        try:
            original = base64.b64decode(d.get("original_base64", ""), validate=True)
        except ValueError:
            original = None
        if original != lines[line - 1]:
            fail(f"{where}: original_base64 is not the input line")
        dead_by_line[line] = d.get("reason")

    # tagged records: schema and decisions, by id
    tagged = collections.defaultdict(collections.deque)
    for out_name, records, allowed in (("unique", unique_out, {"unique", "skipped"}),
                                       ("duplicates", dup_out, {"duplicate"})):
        for k, t in enumerate(records, 1):
            dd = t.get("dedup") or {}
            where = f"{out_name} record {k} (id {str(t.get('id'))[:60]!r})"
            if t.get("schema") != "neardup.tagged.v1":
                fail(f"{where}: schema {t.get('schema')!r}")
            if dd.get("decision") not in allowed:
                fail(f"{where}: decision {dd.get('decision')!r} in the {out_name} output")
            if not isinstance(t.get("id"), str) or not t["id"]:
                fail(f"{where}: empty id")
            if not isinstance(t.get("fingerprint"), str) or not FP.match(t["fingerprint"]):
                fail(f"{where}: fingerprint {t.get('fingerprint')!r}")
            if not isinstance(t.get("signatures"), int) or t["signatures"] < 0:
                fail(f"{where}: signatures {t.get('signatures')!r}")
            if dd.get("decision") == "duplicate" and not dd.get("canonical_id"):
                fail(f"{where}: a duplicate without canonical_id")
            tagged[t.get("id")].append(dd.get("decision"))

    # every line exactly once
    outcomes = []
    lost = []
    for k, line in enumerate(lines, 1):
        is_blank = all(b in ASCII_WS for b in line)
        if k in dead_by_line:
            outcomes.append("dead:" + str(dead_by_line[k]))
            if is_blank:
                fail(f"line {k} is blank but has a dead letter")
            continue
        if is_blank:
            outcomes.append("blank")
            continue
        doc = None
        try:
            obj = json.loads(line.decode("utf-8"))
            if isinstance(obj, dict):
                doc = obj["id"] if isinstance(obj.get("id"), str) and obj["id"] else url_id(obj.get("url", ""))
        except (ValueError, RecursionError, AttributeError):
            pass
        if doc is not None and tagged.get(doc):
            outcomes.append("tagged:" + tagged[doc].popleft())
        else:
            outcomes.append("lost")
            lost.append(k)
    if timed_out == "1" and lost:
        # the lines after the stall were never reached: one failure, not one per line
        fail(f"{len(lost)} lines have no outcome because the run was killed; the first is line {lost[0]}: "
             f"the record that stalled the run is in the batch read from there (up to 512 lines)")
    else:
        for k in lost[:10]:
            fail(f"line {k} ({cats[k - 1]}) has neither a dead letter nor a tagged record")
        if len(lost) > 10:
            fail(f"... {len(lost) - 10} more lost lines")
    extra_tagged = sum(len(v) for v in tagged.values())
    if extra_tagged:
        fail(f"{extra_tagged} tagged records match no input line")

    # what each category should yield
    for k, (cat, got) in enumerate(zip(cats, outcomes), 1):
        want = expect["categories"][cat]["expect"]
        ok = (got != "lost") and (
            want == "any"
            or (want == "tagged" and got.startswith("tagged:"))
            or (want == "dead" and got.startswith("dead:"))
            or want == got)
        if not ok and not (got == "lost" and timed_out == "1"):
            fail(f"line {k} ({cat}): expected {want}, got {got}")

    # the counts: summary JSON, output lines, line by line
    count = collections.Counter(outcomes)
    n_blank = count["blank"]
    n_dead = sum(v for o, v in count.items() if o.startswith("dead:"))
    n_tagged = sum(v for o, v in count.items() if o.startswith("tagged:"))
    decisions = collections.Counter(o.split(":", 1)[1] for o in outcomes if o.startswith("tagged:"))
    checks = [
        ("summary lines = input lines", summary.get("lines"), n),
        ("summary lines = pages + bad + blank", summary.get("lines"),
         (summary.get("pages") or 0) + (summary.get("bad") or 0) + (summary.get("blank") or 0)),
        ("summary bad = dead-letter lines", summary.get("bad"), len(dead)),
        ("summary pages = tagged lines", summary.get("pages"), len(unique_out) + len(dup_out)),
        ("summary unique + skipped = unique-output lines", (summary.get("unique") or 0) + (summary.get("skipped") or 0),
         len(unique_out)),
        ("summary duplicate = duplicates-output lines", summary.get("duplicate"), len(dup_out)),
        ("summary blank = blank input lines", summary.get("blank"), n_blank),
        ("input lines = tagged + dead letters + blank", n, n_tagged + n_dead + n_blank),
    ]
    for what, a, b in checks:
        if not summary and what.startswith("summary"):
            continue  # already failed: no summary
        if a != b:
            fail(f"{what}: {a} != {b}")
    if rss_kb <= 0:
        fail("no peak RSS measured")
    elif rss_kb > rss_limit_kb:
        fail(f"peak RSS {rss_kb / 1024:.1f} MiB is over the limit {rss_limit_kb / 1024:.0f} MiB")

    if quiet:
        for f in fails[:20]:
            print(f"  {only_category}: {f}")
        return 1 if fails else 0

    # the table
    mib = lambda kb: f"{kb / 1024:.1f} MiB"  # noqa: E731
    title = f"category {only_category}" if only_category else "hostile corpus"
    print(f"== neardup dedup, {title}: {n:,} lines, {len(data) / 1e6:.1f} MB ==")
    rows = [("records tried (input lines)", f"{n:,}"),
            ("blank lines", f"{n_blank:,}"),
            ("dead letters", f"{n_dead:,}")]
    rows += [(f"  {o[5:]}", f"{v:,}") for o, v in sorted(count.items()) if o.startswith("dead:")]
    rows += [("tagged records", f"{n_tagged:,}")]
    rows += [(f"  {d}", f"{decisions[d]:,}") for d in ("unique", "duplicate", "skipped")]
    rows += [("  of them repeated ids", f"{summary.get('repeated', '?')}"),
             ("lost lines" + (" (not reached: killed)" if timed_out == "1" else ""), f"{len(lost):,}"),
             ("exit code", f"{rc}" + (" (killed: timeout)" if timed_out == "1" else "")),
             ("peak RSS", f"{mib(rss_kb)} (limit {mib(rss_limit_kb)} = {rss_base} MiB + {rss_factor} x "
                          f"max-record-bytes {max_record >> 20} MiB; {rss_how})"),
             ("wall time", f"{wall} s (the binary's own count: {summary.get('seconds', 0):.2f} s)")]
    w = max(len(r[0]) for r in rows)
    for a, b in rows:
        print(f"{a:<{w}}  {b}")
    if not only_category:
        print()
        per = collections.defaultdict(collections.Counter)
        for cat, o in zip(cats, outcomes):
            per[cat][o] += 1
        print(f"{'category':<20} {'lines':>6}  {'expected':<24} outcome")
        for cat, spec in expect["categories"].items():
            got = ", ".join(f"{o} {v}" for o, v in sorted(per[cat].items()))
            print(f"{cat:<20} {spec['count']:>6}  {spec['expect']:<24} {got}")
    print()
    if fails:
        print(f"FAILED: {len(fails)} assertion(s)")
        for f in fails[:60]:
            print("  - " + f)
        return 1
    print("OK: every line accounted for once, every dead letter has a reason, every tagged record a "
          "decision, memory under the limit")
    return 0


result = []
t = threading.Thread(target=lambda: result.append(main()))
t.start()
t.join()
sys.exit(result[0] if result else 3)  # 3: the check itself failed
PY
status=0
check "$work/run" "$corpus" || status=1

# Pass 2: one line far over the record limit, streamed through a FIFO (never on disk). It
# must become a too_large dead letter, and memory must stay under the same limit: the record
# limit, not the length of the line, is what bounds memory.
oversize_mib=${HOSTILE_OVERSIZE_MIB:-256}
if [ "$oversize_mib" -gt 0 ]; then
  mkfifo "$work/oversize.fifo"
  python3 -c 'import sys
w = sys.stdout.buffer
for _ in range(int(sys.argv[1])):
    w.write(b"a" * (1 << 20))
w.write(b"\n")' "$oversize_mib" >"$work/oversize.fifo" &
  writer=$!
  echo "check-hostile: pass 2, one line of $oversize_mib MiB (record limit $((MAX_RECORD >> 20)) MiB)" >&2
  run_dedup "$work/oversize.fifo" "$work/oversize"
  kill "$writer" 2>/dev/null || true # still writing only if the run stopped reading
  wait "$writer" 2>/dev/null || true
  python3 - "$work/oversize" "$rc" "$timed_out" "$wall_s" "$rss_kb" "$RSS_LIMIT_KB" "$oversize_mib" \
    "$((MAX_RECORD >> 20))" <<'PY' || status=1
import json, re, sys
from pathlib import Path
run, rc, timed_out, wall, rss_kb, limit_kb, mib, record_mib = sys.argv[1:9]
run, rss_kb, limit_kb = Path(run), int(rss_kb), int(limit_kb)
fails = []
if timed_out == "1" or rc != "0":
    fails.append(f"exit code {rc}" + (" (killed: timeout)" if timed_out == "1" else ""))
try:
    s = json.loads((run / "summary.json").read_text().strip().splitlines()[-1])
except (ValueError, IndexError, OSError):
    s = {}
    fails.append("no summary JSON")
if (s.get("lines"), s.get("bad"), s.get("pages"), s.get("blank")) != (1, 1, 0, 0):
    fails.append(f"summary {s}: expected 1 line, 1 dead letter")
dl = run / "dead-letter.jsonl"
head = dl.open("rb").read(4096).decode("utf-8", "replace") if dl.exists() else ""
m = re.search(r'"reason":"([a-z_]+)"', head)
if not m or m.group(1) != "too_large":
    fails.append(f"dead letter reason {m.group(1) if m else None}, expected too_large")
if rss_kb > limit_kb:
    fails.append(f"peak RSS {rss_kb / 1024:.1f} MiB is over the limit {limit_kb / 1024:.0f} MiB")
dl_mb = dl.stat().st_size / 1e6 if dl.exists() else 0
print(f"== pass 2: one {mib} MiB line, record limit {record_mib} MiB ==")
print(f"outcome        {m.group(1) if m else '?'} dead letter ({dl_mb:.0f} MB written to the dead-letter file)")
print(f"peak RSS       {rss_kb / 1024:.1f} MiB (limit {limit_kb / 1024:.0f} MiB)")
print(f"wall time      {wall} s")
for f in fails:
    print("  - " + f)
print(f"FAILED: {len(fails)} assertion(s)" if fails else "OK")
sys.exit(1 if fails else 0)
PY
fi

if [ "$per_category" = 1 ]; then
  echo
  echo "== each category on its own (fresh index each), slowest first =="
  : >"$work/per-category.tsv"
  for f in "$work"/by-category/*.jsonl; do
    c=$(basename "$f" .jsonl)
    run_dedup "$f" "$work/cat-$c"
    check "$work/cat-$c" "$f" "$c" quiet || status=1
    lines=$(awk 'END { print NR }' "$f")
    mb=$(awk -v b="$(wc -c <"$f")" 'BEGIN { printf "%.1f", b / 1e6 }')
    note=""
    [ "$rc" = 0 ] || { note="exit $rc"; status=1; }
    [ "$timed_out" = 0 ] || { note="killed after ${timeout_s} s"; status=1; }
    printf "%s\t%s\t%s\t%s\t%s\t%s\n" "$c" "$lines" "$mb" "$wall_s" "$(awk -v k="$rss_kb" 'BEGIN { printf "%.1f", k / 1024 }')" "$note" >>"$work/per-category.tsv"
  done
  printf "%-20s %6s %8s %9s %10s  %s\n" category lines MB "wall s" "peak MiB" note
  sort -t$'\t' -k4,4gr "$work/per-category.tsv" | awk -F'\t' '{ printf "%-20s %6s %8s %9s %10s  %s\n", $1, $2, $3, $4, $5, $6 }'
fi
exit "$status"
