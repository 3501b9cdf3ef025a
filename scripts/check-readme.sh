#!/usr/bin/env bash
# Runs the README's use cases as written and checks what they print and write.
#
#   NEARDUP_BIN=path/to/neardup bash scripts/check-readme.sh
#
# The ```sh blocks are read from README.md when the script runs (nothing of them is copied
# here), and each runs as one bash script with `set -euo pipefail`, its lines at their README
# line numbers: a failing command is named as README.md:LINE, a block that hangs is stopped
# after its time limit and named with the line it was on. Running a block changes it only so
# (a README DEVIATION below is printed, the block run changed, and the check fails at the end:
# the README must run as written):
#   - `target/release/neardup` is run as `neardup`: a directory first on PATH holds `neardup`,
#     a link to NEARDUP_BIN (default ${CARGO_TARGET_DIR:-target}/release/neardup);
#   - a line that starts a process in the background (`... &`) also records its id, and the
#     block's shell holds it until the checks are done, then stops it with SIGTERM and keeps
#     its exit status (which must be 0).
# The paths under /tmp and /var/tmp that the blocks name (/var/tmp/neardup among them) are
# removed before and after.
#
# What runs, block by block:
#   - the top of the page: of its first command, the file-mode run (`cargo run --release --
#     dedup ...` as `neardup dedup ...`; the install, the build and the tests are CI's own
#     steps); its summary must be the one Quick start quotes.
#   - Quick start: `neardup explain ... ex-003` must print the decision stored for the page.
#   - Deduplicate a file: every page answered once, the tallies Quick start quotes; the
#     README's tagged-record example has the keys of a real record (top level and `dedup`).
#   - Run between fetcher and indexer: needs a broker at 127.0.0.1:9092. The script starts
#     one Apache Kafka broker there (scripts/kafka-broker.sh, data in a temporary directory;
#     it fails if 9092 or its controller port 9093 is taken) and stands in for the crawler's
#     fetcher: it creates `pages` (2 partitions) and produces examples/pages.jsonl to it,
#     one record a line, round-robin, with a small Java client on the Kafka jars of
#     scripts/install-deps.sh. The block runs in a temporary directory (it writes
#     neardup.toml there); then every page must come out once on pages-unique or
#     pages-duplicate (no dead letter), with the decisions of file mode, and the stage must
#     exit 0 on SIGTERM; the one read of /metrics right after /readyz must show the
#     neardup_records counters (the stage shows them from the moment it is ready).
#   - Replay a topic: its three commands, the stage stopped, against the same broker, topics
#     and neardup.toml. Each must exit 0 and print its JSON summary, with every record in its
#     range answered and produced (nothing produced on --dry-run); the new index's topics get
#     every page; the republished records are byte for byte the stage's. Where the README's
#     block cannot run as written on these 13 records, the script says so ("README
#     DEVIATION") and runs it changed: offsets in `--start` at or past a partition's end
#     become half the end; output topics a replay names that the block does not create are
#     created first with `neardup topics create`.
#   - On Kubernetes with Helm: there is no cluster here. The kubectl lines and `helm test`
#     are not run (each prints why; the kubectl lines are recorded); `helm install` runs as
#     `helm template` with the same release, chart, namespace and --set values, and the
#     rendering is validated as scripts/check-helm.sh does (its tools, from
#     scripts/install-helm-tools.sh): kubernetes-validate --strict, kubernetes-models,
#     yamllint, and the drift check through the binary's --check-config; the Secrets the
#     kubectl lines create must be the ones the chart mounts, with the keys it reads.
#   - Serve result sets and explanations: as written, after the stage stopped (both listen on
#     9464); /v1/group must group the ids file mode found near-duplicates (ex-001 with ex-003),
#     `neardup group` must give the same groups, /v1/explain the stored decision; the server
#     must exit 0 on SIGTERM.
#   - Development: not run (it is CI itself, .ci/run).
# A ```sh block under any other heading fails the check until this script knows it.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
export PYTHONDONTWRITEBYTECODE=1

NEARDUP_BIN="${NEARDUP_BIN:-${CARGO_TARGET_DIR:-target}/release/neardup}"
[ -x "$NEARDUP_BIN" ] || { echo "check-readme: no binary at $NEARDUP_BIN (build it, or set NEARDUP_BIN)" >&2; exit 1; }
NEARDUP_BIN="$(cd "$(dirname "$NEARDUP_BIN")" && pwd)/$(basename "$NEARDUP_BIN")"
BROKER_PORT=9092
CONTROLLER_PORT=9093
HTTP_PORT=9464
KUBE=1.30.0
KAFKA_LIBS="${NEARDUP_KAFKA_LIBS:-$HOME/.cache/neardup-kafka/$(sha256sum scripts/kafka/pom.xml | cut -c1-16)/libs}"

started=$SECONDS
WORK="$(mktemp -d "${TMPDIR:-/tmp}/check-readme.XXXXXX")"
mkdir -p "$WORK/bin" "$WORK/shim" "$WORK/blocks"
ln -s "$NEARDUP_BIN" "$WORK/bin/neardup"
export PATH="$WORK/bin:$PATH"

BROKER_PID=""
CLEAN_PATHS=()
DEVIATIONS=()
ok=0

log() { printf 'check-readme: %s\n' "$*"; }
die() {
  printf '\ncheck-readme: FAIL: %s\n' "$*" >&2
  exit 1
}
deviate() { # the README cannot run as written here: say so now and in the summary
  DEVIATIONS+=("$1")
  echo "check-readme: README DEVIATION: $1" >&2
}
port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Stops a process that is not this shell's child: SIGTERM, then SIGKILL after $2 seconds.
stop_pid() {
  local pid="$1" grace="${2:-10}" i
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < grace * 5; i++)); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.2
  done
  kill -KILL "$pid" 2>/dev/null || true
}

cleanup() {
  local rc=$? st p
  set +e
  trap - EXIT INT TERM
  for st in "$WORK"/blocks/*/; do
    # a block whose shell was not waited for: stop it and what it started
    [ -f "$st/pid" ] || continue
    : >"$st/release"
    if [ -f "$st/bg" ]; then
      while read -r p; do stop_pid "$p" 5; done <"$st/bg"
    fi
    [ -f "$st/pid" ] && stop_pid "$(cat "$st/pid")" 5
  done
  if [ -n "$BROKER_PID" ]; then
    stop_pid "$BROKER_PID" 20
    wait "$BROKER_PID" 2>/dev/null
  fi
  for p in "${CLEAN_PATHS[@]}"; do rm -rf -- "$p"; done
  if [ "$rc" -eq 0 ] && [ "$ok" = 1 ]; then
    rm -rf "$WORK"
  else
    echo "check-readme: failed after $((SECONDS - started)) s; its files are kept in $WORK" >&2
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------------------------------------
# The README's blocks, and the checks on what they print (Python, standard library; the Helm
# check's Secrets part uses PyYAML from the chart tools' venv).
cat >"$WORK/readme.py" <<'PY'
import collections, glob, json, os, re, shlex, sys

README = "README.md"


def fail(msg):
    print(f"check-readme: FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def parse(readme):
    """Fenced blocks: lang, heading above, [(line, text)]."""
    blocks, heading, fence = [], None, None
    with open(readme, encoding="utf-8") as f:
        text = f.read().split("\n")
    for i, line in enumerate(text, 1):
        if fence is None:
            m = re.match(r"^```(\S*)\s*$", line)
            if m:
                fence = {"lang": m.group(1), "heading": heading, "open": i, "lines": []}
                continue
            m = re.match(r"^#{1,6}\s+(.*?)\s*$", line)
            if m:
                heading = m.group(1)
        elif re.match(r"^```\s*$", line):
            blocks.append(fence)
            fence = None
        else:
            fence["lines"].append([i, line])
    if fence:
        fail(f"{readme}:{fence['open']}: a code block is not closed")
    return blocks


def load(path):
    with open(path) as f:
        return json.load(f)


def sh_blocks(blocks):
    return [(i, b) for i, b in enumerate(blocks) if b["lang"] == "sh"]


def commands(block):
    """Logical commands of a sh block: (first line, text with continuations joined); the
    bodies of here-documents are left out; comment lines are skipped."""
    out, cur, start, heredoc = [], None, None, None
    for n, line in block["lines"]:
        if heredoc is not None:
            if line.strip() == heredoc:
                heredoc = None
            continue
        if cur is None:
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            cur, start = "", n
        if line.endswith("\\"):
            cur += line[:-1] + " "
            continue
        cur += line
        m = re.search(r"<<-?\s*['\"]?(\w+)['\"]?", cur)
        if m:
            heredoc = m.group(1)
        out.append((start, cur))
        cur = None
    return out


def words(cmd):
    try:
        return shlex.split(cmd, comments=True)
    except ValueError as e:
        fail(f"cannot read the command {cmd!r}: {e}")


def flag(ws, name):
    for i, w in enumerate(ws):
        if w == name and i + 1 < len(ws):
            return ws[i + 1]
        if w.startswith(name + "="):
            return w.split("=", 1)[1]
    return None


def neardup_cmd(block, sub):
    """The first `neardup SUB` command of a block (target/release/neardup counts)."""
    for n, c in commands(block):
        ws = words(rewrite(c))
        if ws and ws[0] == "neardup" and sub in ws[1:3]:
            return n, c, ws
    return None


def rewrite(line):
    return re.sub(r"(?<![\w/.-])target/release/neardup\b", "neardup", line)


def dedup_files(ws):
    d = {"input": flag(ws, "--input"), "index": flag(ws, "--index"),
         "unique": flag(ws, "--unique"), "duplicates": flag(ws, "--duplicates")}
    if ">" in ws:
        d["unique"] = ws[ws.index(">") + 1]
    return d


def records(paths):
    out = []
    for p in paths:
        if not p or p in ("-", "/dev/null"):
            continue
        with open(p) as f:
            for k, line in enumerate(f, 1):
                if line.strip():
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        fail(f"{p}:{k} is not JSON")
    return out


def page_ids(path):
    ids = []
    with open(path) as f:
        for line in f:
            if line.strip():
                ids.append(json.loads(line).get("id"))
    return ids


def segments(path):
    """Block stdout split at the markers the block's shell prints: README line → text."""
    with open(path, errors="replace") as f:
        text = f.read()
    seg = collections.defaultdict(str)
    parts = re.split(r"\n@@README\.md:(\d+)@@\n", text)
    for k in range(1, len(parts) - 1, 2):
        seg[int(parts[k])] += parts[k + 1].split("\n@@END@@\n")[0]
    return seg


def objects(text):
    """The JSON objects in a text (command output interleaved with JSON log lines)."""
    dec, i, out = json.JSONDecoder(), 0, []
    while True:
        i = text.find("{", i)
        if i < 0:
            return out
        try:
            obj, j = dec.raw_decode(text, i)
            out.append(obj)
            i = j
        except ValueError:
            i += 1


def one(objs, pred, what, where):
    got = [o for o in objs if isinstance(o, dict) and pred(o)]
    if not got:
        fail(f"{where}: printed no {what}")
    return got[-1]


def tallies(recs):
    return collections.Counter(r["dedup"]["decision"] for r in recs)


def quoted_summary(blocks):
    """Quick start's quoted summary: (text before the ellipsis, counts)."""
    for b in blocks:
        if b["heading"] == "Quick start" and b["lang"] == "" and b["lines"]:
            t = b["lines"][0][1]
            if t.startswith("neardup dedup:"):
                m = re.search(r"(\d+) pages: (\d+) unique, (\d+) duplicate, (\d+) skipped", t)
                if not m:
                    fail(f"README.md:{b['lines'][0][0]}: the quoted summary has no counts")
                pages, u, d, s = map(int, m.groups())
                return b["lines"][0][0], t.split("…")[0].rstrip(), {"pages": pages, "unique": u, "duplicate": d, "skipped": s}
    fail("README.md: Quick start quotes no `neardup dedup:` summary")


def groups_of(recs):
    """File mode's near-duplicate groups: id → the id of its canonical page."""
    return {r["id"]: (r["dedup"].get("canonical_id") or r["id"]) for r in recs}


# --- commands --------------------------------------------------------------------------------

def cmd_parse(readme, out):
    with open(out, "w") as f:
        json.dump(parse(readme), f)


def cmd_find(blocks_path, heading, *known):
    blocks = load(blocks_path)
    shs = sh_blocks(blocks)
    if heading == "--top":
        if not shs:
            fail("README.md has no ```sh block")
        print(shs[0][0])
        return
    if heading == "--known":
        top = shs[0][0] if shs else None
        for i, b in shs:
            if i != top and b["heading"] not in known:
                fail(f"README.md:{b['open']}: a ```sh block under '{b['heading']}', which "
                     "scripts/check-readme.sh does not know: tell it how to run and check it")
        return
    got = [i for i, b in shs if b["heading"] == heading]
    if len(got) != 1:
        fail(f"README.md: {len(got)} ```sh blocks under the heading '{heading}' (expected 1)")
    print(got[0])


def cmd_gen(blocks_path, idx, out, *opts):
    """The block as a bash script, its lines at their README line numbers."""
    b = load(blocks_path)[int(idx)]
    subst, top = [], False
    opts = list(opts)
    while opts:
        o = opts.pop(0)
        if o == "--top-dedup":
            top = True
        elif o == "--subst":
            subst.append((opts.pop(0), opts.pop(0)))
    lines = [(n, rewrite(t)) for n, t in b["lines"]]
    if top:
        keep = []
        for n, t in lines:
            m = re.search(r"cargo run --release --\s+(dedup\s.*)$", t)
            if m:
                keep.append((n, "neardup " + m.group(1)))
        if len(keep) != 1:
            fail(f"README.md:{b['open']}: the top block has no single `cargo run --release -- dedup` command")
        lines = keep
    for old, new in subst:
        if not any(old in t for _, t in lines):
            fail(f"internal: {old!r} is not in the block")
        lines = [(n, t.replace(old, new)) for n, t in lines]
    pre = ('ND_LAST=0; set -euo pipefail; cd "$ND_CWD"; '
           'trap \'rc=$?; printf "check-readme: [%s] README.md:%s failed (exit %s): %s\\n" "$ND_BLOCK" "$LINENO" "$rc" "$BASH_COMMAND" >&2; exit "$rc"\' ERR; '
           'trap \'[ "$LINENO" = "$ND_LAST" ] || { ND_LAST=$LINENO; echo "$LINENO" >"$ND_STATE/line"; printf "\\n@@README.md:%s@@\\n" "$LINENO"; }\' DEBUG')
    src = [pre]
    for n, t in lines:
        while len(src) < n - 1:
            src.append("")
        m = re.match(r"^(.*[^&])&(\s*#.*)?$", t)
        if m:
            t = m.group(1) + '& echo "$!" >>"$ND_STATE/bg"' + (m.group(2) or "")
        src.append(t)
    src.append(r"""trap - DEBUG ERR
printf '\n@@END@@\n'
: >"$ND_STATE/done"
if [ -s "$ND_STATE/bg" ]; then
  # hold what the block started in the background until the checks are done (10 min at most)
  for _ in $(seq 3000); do [ -e "$ND_STATE/release" ] && break; sleep 0.2; done
  while read -r p; do kill -TERM "$p" 2>/dev/null || true; done <"$ND_STATE/bg"
  while read -r p; do rc=0; wait "$p" || rc=$?; echo "$p $rc" >>"$ND_STATE/bg.exit"; done <"$ND_STATE/bg"
fi""")
    with open(out, "w") as f:
        f.write("\n".join(src) + "\n")


def cmd_paths(blocks_path, *idxs):
    """The entries under /tmp and /var/tmp that blocks name."""
    blocks = load(blocks_path)
    seen = set()
    for i in idxs:
        for _, t in blocks[int(i)]["lines"]:
            for m in re.finditer(r"(?<![\w.-])(/(?:var/)?tmp/[A-Za-z0-9._-]+)", t):
                seen.add(m.group(1))
    for p in sorted(seen):
        print(p)


def cmd_check_top(blocks_path, top, err_path):
    blocks = load(blocks_path)
    n, c, ws = neardup_cmd_top(blocks[int(top)])
    line, prefix, counts = quoted_summary(blocks)
    with open(err_path, errors="replace") as f:
        err = f.read()
    summ = [l for l in err.splitlines() if l.startswith("neardup dedup:")]
    if not summ:
        fail(f"README.md:{n}: printed no summary on stderr")
    if not summ[-1].startswith(prefix):
        fail(f"README.md:{n}: the summary is\n  {summ[-1]}\nbut README.md:{line} quotes\n  {prefix} …")
    files = dedup_files(ws)
    recs = records([files["unique"], files["duplicates"]])
    ids = page_ids(files["input"])
    if sorted(r["id"] for r in recs) != sorted(ids):
        fail(f"README.md:{n}: the outputs do not answer each of the {len(ids)} pages once ({len(recs)} records)")
    print(f"top command: {summ[-1]}")


def neardup_cmd_top(block):
    for n, t in block["lines"]:
        m = re.search(r"cargo run --release --\s+(dedup\s.*)$", t)
        if m:
            return n, t, words("neardup " + m.group(1))
    fail("README.md: the top block has no `cargo run --release -- dedup` command")


def cmd_check_explain(blocks_path, qs, top, out_path):
    blocks = load(blocks_path)
    n, c, ws = neardup_cmd(blocks[int(qs)], "explain")
    pid = ws[-1]
    files = dedup_files(neardup_cmd_top(blocks[int(top)])[2])
    stored = {r["id"]: r for r in records([files["unique"], files["duplicates"]])}
    if pid not in stored:
        fail(f"README.md:{n}: explains {pid}, which the top command did not answer")
    with open(out_path) as f:
        text = f.read()
    e = one(objects(text), lambda o: o.get("id") == pid and "decision" in o, f"explanation of {pid}", f"README.md:{n}")
    want = stored[pid]["dedup"]
    if e["decision"] != want["decision"] or e.get("canonical_id") != want.get("canonical_id"):
        fail(f"README.md:{n}: explain says {e['decision']} of {e.get('canonical_id')}, the index stored "
             f"{want['decision']} of {want.get('canonical_id')}")
    print(f"explain {pid}: {e['decision']} of {e.get('canonical_id')} (similarity {e.get('similarity')})")


def cmd_check_dedup(blocks_path, idx):
    blocks = load(blocks_path)
    n, c, ws = neardup_cmd(blocks[int(idx)], "dedup")
    files = dedup_files(ws)
    ids = page_ids(files["input"])
    uniq = records([files["unique"]])
    dups = records([files["duplicates"]]) if files["duplicates"] else []
    got = sorted(r.get("id") for r in uniq + dups)
    if len(uniq) + len(dups) != len(ids):
        fail(f"README.md:{n}: {len(uniq)} unique and skipped + {len(dups)} duplicate lines, for {len(ids)} pages in {files['input']}")
    if got != sorted(ids):
        fail(f"README.md:{n}: the outputs do not answer each page of {files['input']} once")
    for r in uniq + dups:
        if r.get("schema") != "neardup.tagged.v1" or "decision" not in r.get("dedup", {}):
            fail(f"README.md:{n}: {r.get('id')} is not a tagged record")
    if files["duplicates"] and any(r["dedup"]["decision"] != "duplicate" for r in dups):
        fail(f"README.md:{n}: {files['duplicates']} holds records that are not duplicates")
    if any(r["dedup"]["decision"] == "duplicate" for r in uniq) and files["duplicates"]:
        fail(f"README.md:{n}: {files['unique']} holds duplicates")
    line, _, counts = quoted_summary(blocks)
    t = tallies(uniq + dups)
    for k in ("unique", "duplicate", "skipped"):
        if t[k] != counts[k]:
            fail(f"README.md:{n}: {t[k]} {k}, README.md:{line} says {counts[k]}")
    print(f"deduplicate a file: {len(ids)} pages → {len(uniq)} lines in {files['unique']}, {len(dups)} in "
          f"{files['duplicates']} ({t['unique']} unique, {t['duplicate']} duplicate, {t['skipped']} skipped)")


def cmd_check_keys(blocks_path, idx):
    """The README's tagged-record example has the keys of a real record of the same page."""
    blocks = load(blocks_path)
    ex = [b for b in blocks if b["lang"] == "json" and any("neardup.tagged.v1" in t for _, t in b["lines"])]
    if len(ex) != 1:
        fail(f"README.md: {len(ex)} JSON examples of a tagged record (expected 1)")
    line = ex[0]["lines"][0][0]
    text = "\n".join(t for _, t in ex[0]["lines"])
    try:
        doc = json.loads(re.sub(r"(?<=[:\[,])\s*…", " null", text))
    except ValueError as e:
        fail(f"README.md:{line}: the tagged-record example cannot be read, elisions aside: {e}")
    n, c, ws = neardup_cmd(blocks[int(idx)], "dedup")
    files = dedup_files(ws)
    real = {r["id"]: r for r in records([files["unique"], files["duplicates"]])}
    if doc.get("id") not in real:
        fail(f"README.md:{line}: the example's id {doc.get('id')} is not in the output of README.md:{n}")
    r = real[doc["id"]]
    for what, a, b in (("top level", doc, r), ("dedup", doc.get("dedup", {}), r.get("dedup", {}))):
        if set(a) != set(b):
            fail(f"README.md:{line}: the example's keys ({what}) differ from a real record's: "
                 f"only in the README {sorted(set(a) - set(b))}, only in the output {sorted(set(b) - set(a))}")
        if what == "dedup":
            for k in ("decision", "canonical_id", "found_by", "method", "threshold", "repeated"):
                if k in a and a[k] is not None and a[k] != b[k]:
                    fail(f"README.md:{line}: the example says dedup.{k} = {a[k]!r}, the output {b[k]!r}")
    print(f"tagged-record example: same keys as the output for {doc['id']} ({len(r)} top-level, {len(r['dedup'])} in dedup)")


def read_tsv(path):
    out = []
    with open(path) as f:
        for line in f:
            t, p, o, v = line.rstrip("\n").split("\t", 3)
            out.append({"topic": t, "partition": int(p), "offset": int(o), "value": v, "json": json.loads(v)})
    return out


def cmd_check_run(blocks_path, idx, out_path, tsv, dedup_idx):
    blocks = load(blocks_path)
    seg = segments(out_path)
    cmds = commands(blocks[int(idx)])
    for n, c in cmds:
        if "/readyz" in c and "ready" not in seg.get(n, ""):
            fail(f"README.md:{n}: /readyz did not answer ready")
        if "/metrics" in c and not re.search(r"^neardup_records", seg.get(n, ""), re.M):
            fail(f"README.md:{n}: no neardup_records metric")
    n, c, ws = neardup_cmd(blocks[int(dedup_idx)], "dedup")
    files = dedup_files(ws)
    ids = page_ids(files["input"])
    fm = records([files["unique"], files["duplicates"]])
    group = groups_of(fm)
    outs = read_tsv(tsv)
    dead = [o for o in outs if o["topic"] == "pages-dead-letter"]
    if dead:
        fail(f"the stage wrote {len(dead)} dead letters, e.g. {dead[0]['value'][:300]}")
    tagged = [o for o in outs if o["topic"] in ("pages-unique", "pages-duplicate")]
    got = collections.Counter(o["json"]["id"] for o in tagged)
    if sorted(got) != sorted(ids) or any(v != 1 for v in got.values()):
        fail(f"the stage answered {len(tagged)} records for {len(ids)} pages: {dict(got)}")
    for o in tagged:
        j = o["json"]
        d = j["dedup"]["decision"]
        if (o["topic"] == "pages-duplicate") != (d == "duplicate"):
            fail(f"{j['id']} ({d}) on {o['topic']}")
        if d == "duplicate" and group.get(j["dedup"]["canonical_id"]) != group[j["id"]]:
            fail(f"{j['id']}: the stage found it a duplicate of {j['dedup']['canonical_id']}, file mode of {group[j['id']]}")
        if d == "skipped" and group[j["id"]] != j["id"]:
            fail(f"{j['id']}: skipped by the stage, not in file mode")
    if tallies([o["json"] for o in tagged]) != tallies(fm):
        fail(f"the stage's decisions {dict(tallies([o['json'] for o in tagged]))} differ from file mode's {dict(tallies(fm))}")
    fmr = {r["id"]: r for r in fm}
    # one record of file mode's for each decision
    kinds = {r["dedup"]["decision"]: r for r in fm}
    for o in tagged:
        # the same keys as file mode's record, less `dedup.repeated` (file mode only: the
        # stage's output for a redelivered record stays byte-identical); a page of a group
        # the stage met in another order than the file (partitions interleave) is compared
        # with a record of file mode's with its decision
        j, f = o["json"], fmr[o["json"]["id"]]
        if j["dedup"]["decision"] != f["dedup"]["decision"]:
            f = kinds.get(j["dedup"]["decision"], f)
        if set(j) != set(f) or set(j["dedup"]) != set(f["dedup"]) - {"repeated"}:
            fail(f"{j['id']}: the stage's record has other keys than file mode's: {sorted(set(j) ^ set(f))} "
                 f"{sorted(set(j['dedup']) ^ (set(f['dedup']) - {'repeated'}))}")
    t = tallies([o["json"] for o in tagged])
    print(f"the stage: {len(tagged)} pages answered once on pages-unique / pages-duplicate "
          f"({t['unique']} unique, {t['duplicate']} duplicate, {t['skipped']} skipped, as file mode), no dead letter")


def parse_ends(path):
    ends = {}
    with open(path) as f:
        for line in f:
            w = line.split()
            if w and w[0] == "END":
                ends[(w[1], int(w[2]))] = int(w[3])
    return ends


def cmd_replay_plan(blocks_path, idx, ends_path):
    """What the Replay block needs changed to run on this topic: JSON {subst, create}."""
    blocks = load(blocks_path)
    ends = parse_ends(ends_path)
    cmds = commands(blocks[int(idx)])
    plan = {"subst": [], "create": [], "read": ["pages-unique", "pages-duplicate"]}
    creates = any("topics create" in c for _, c in cmds)
    for n, c in cmds:
        ws = words(rewrite(c))
        if "replay" not in ws:
            continue
        start = flag(ws, "--start")
        if start and re.fullmatch(r"[^,:]+:\d+:\d+(,[^,:]+:\d+:\d+)*", start):
            parts = [s.rsplit(":", 2) for s in start.split(",")]
            past = [(t, int(p), int(o)) for t, p, o in parts if int(o) >= ends.get((t, int(p)), 0)]
            if past:
                new = ",".join(f"{t}:{p}:{ends.get((t, int(p)), 0) // 2}" for t, p, o in parts)
                plan["subst"].append([start, new, n, ", ".join(f"{t}:{p} ends at {ends.get((t, p), 0)}" for t, p, _ in past)])
        topics = [flag(ws, f) for f in ("--unique-topic", "--duplicate-topic")]
        plan["read"] += [t for t in topics if t and t not in plan["read"]]
        if any(topics) and not creates and "--dry-run" not in " ".join(ws):
            plan["create"].append([topics[0] or "pages-unique", topics[1] or "pages-duplicate", n])
    print(json.dumps(plan))


def cmd_check_replay(blocks_path, idx, out_path, tsv, plan_path, dedup_idx):
    blocks = load(blocks_path)
    subst = load(plan_path)["subst"]
    seg = segments(out_path)
    n0, c0, ws0 = neardup_cmd(blocks[int(dedup_idx)], "dedup")
    ids = page_ids(dedup_files(ws0)["input"])
    outs = read_tsv(tsv)
    by_topic = collections.defaultdict(list)
    for o in outs:
        by_topic[o["topic"]].append(o)
    republished = 0
    for n, c in commands(blocks[int(idx)]):
        for old, new, _, _ in subst:
            c = c.replace(old, new)
        ws = words(rewrite(c))
        if "replay" not in ws:
            continue
        s = one(objects(seg.get(n, "")), lambda o: o.get("mode") == "replay", "JSON summary", f"README.md:{n}")
        rng = sum(max(0, e - b) for b, e in s["partitions"].values())
        dry = "--dry-run" in ws
        start = flag(ws, "--start") or "earliest"
        msg = f"README.md:{n}: replay from {start}"
        if s.get("stopped_by") != "end":
            fail(f"{msg}: stopped by {s.get('stopped_by')}, not at the end")
        if s["records"] != rng:
            fail(f"{msg}: {s['records']} records read, its ranges {s['partitions']} hold {rng}")
        if s["unique"] + s["duplicate"] + s["skipped"] + s["dead_letter"] != s["records"]:
            fail(f"{msg}: {s['records']} records but {s['unique']}+{s['duplicate']}+{s['skipped']}+{s['dead_letter']} answered: {json.dumps(s)[:400]}")
        if s["produced"] != (0 if dry else s["records"]):
            fail(f"{msg}: {s['produced']} records produced for {s['records']} read{' (dry run)' if dry else ''}: {json.dumps(s)[:400]}")
        if s["dead_letter"]:
            fail(f"{msg}: {s['dead_letter']} dead letters")
        if start == "earliest" and s["records"] != len(ids):
            fail(f"{msg}: {s['records']} records, the topic holds {len(ids)}")
        if re.fullmatch(r"[^,:]+:\d+:\d+(,[^,:]+:\d+:\d+)*", start):
            if s["records"] == 0:
                fail(f"{msg}: nothing to replay from these offsets")
            if s["repeated"] != s["records"] and not flag(ws, "--index"):
                fail(f"{msg}: {s['repeated']} of {s['records']} answered from the index")
        ut, dt = flag(ws, "--unique-topic"), flag(ws, "--duplicate-topic")
        if not dry and (ut or dt):
            got = sorted(o["json"]["id"] for t in (ut, dt) if t for o in by_topic[t])
            if got != sorted(ids if start == "earliest" else got):
                fail(f"{msg}: {ut} and {dt} hold {len(got)} records, not each page once")
        elif not dry:
            republished += s["produced"]
        print(f"replay from {start}{' --dry-run' if dry else ''}: exit 0, {s['records']} records "
              f"({s['unique']} unique, {s['duplicate']} duplicate, {s['skipped']} skipped, {s['repeated']} repeated), "
              f"{s['produced']} produced")
    main = by_topic["pages-unique"] + by_topic["pages-duplicate"]
    if len(main) != len(ids) + republished:
        fail(f"pages-unique and pages-duplicate hold {len(main)} records, expected {len(ids)} from the stage + {republished} republished")
    vals = collections.defaultdict(set)
    for o in main:
        vals[o["json"]["id"]].add((o["topic"], o["value"]))
    differ = [k for k, v in vals.items() if len(v) != 1]
    if differ:
        fail(f"republished records differ from the stage's for {differ}")
    print(f"republished: {republished} records, byte for byte the stage's")


def cmd_check_serve(blocks_path, idx, out_path, top):
    blocks = load(blocks_path)
    seg = segments(out_path)
    files = dedup_files(neardup_cmd_top(blocks[int(top)])[2])
    group = groups_of(records([files["unique"], files["duplicates"]]))
    http = cli = None
    for n, c in commands(blocks[int(idx)]):
        ws = words(rewrite(c))
        where = f"README.md:{n}"
        if "/readyz" in c and "ready" not in seg.get(n, ""):
            fail(f"{where}: /readyz did not answer ready")
        if any("/v1/group" in w for w in ws):
            body = json.loads(flag(ws, "-d"))
            asked = [i if isinstance(i, str) else i.get("id") for i in body["items"]]
            http = (n, asked, one(objects(seg.get(n, "")), lambda o: "groups" in o, "group answer", where))
        elif any("/v1/explain/" in w for w in ws):
            pid = re.search(r"/v1/explain/([^?\s]+)", c).group(1)
            e = one(objects(seg.get(n, "")), lambda o: o.get("id") == pid and "decision" in o, f"explanation of {pid}", where)
            print(f"/v1/explain/{pid}: {e['decision']} of {e.get('canonical_id')}")
        elif ws[:2] == ["neardup", "group"]:
            asked = [w for w in ws[2:] if not w.startswith("-") and w != flag(ws, "--index")]
            cli = (n, asked, one(objects(seg.get(n, "")), lambda o: "groups" in o, "groups", where))
    if not http or not cli:
        fail("README.md: the Serve block has no /v1/group request or no `neardup group`")

    def sets(ans):
        return sorted(sorted([g["representative"]["id"]] + [m["id"] for m in g["members"]]) for g in ans["groups"])

    n, asked, ans = http
    expect = collections.defaultdict(list)
    for i in asked:
        if i in group:
            expect[group[i]].append(i)
    expect = sorted(sorted(v) for v in expect.values() if len(v) > 1)
    if sets(ans) != expect:
        fail(f"README.md:{n}: /v1/group groups {sets(ans)}, file mode's near-duplicates among {asked} are {expect}")
    m, asked2, ans2 = cli
    if sets(ans2) != sets(ans) or [g["representative"] for g in ans2["groups"]] != [g["representative"] for g in ans["groups"]]:
        fail(f"README.md:{m}: `neardup group` gives {sets(ans2)}, /v1/group (README.md:{n}) {sets(ans)}")
    print(f"/v1/group and `neardup group`: the same groups {sets(ans)}")


def cmd_check_helm_secrets(state, manifest):
    import yaml
    created = {}
    for f in sorted(glob.glob(os.path.join(state, "kubectl.*.args"))):
        with open(f) as fh:
            a = fh.read().split("\0")[:-1]
        ns = flag(a, "-n") or flag(a, "--namespace") or "default"
        pos = [w for w in a if not w.startswith("-")]
        if a and "create" in a and "secret" in a:
            k = a.index("secret")
            name = [w for w in a[k + 2:] if not w.startswith("-") and w != ns][0]
            keys = set()
            for w in a:
                for p in ("--from-literal=", "--from-file="):
                    if w.startswith(p):
                        v = w[len(p):]
                        keys.add(v.split("=", 1)[0] if "=" in v else os.path.basename(v))
            created[name] = (ns, keys)
    with open(os.path.join(state, "install.args")) as fh:
        h = fh.read().split("\0")[:-1]
    hns = flag(h, "-n") or flag(h, "--namespace") or "default"
    for name, (ns, _) in created.items():
        if ns != hns:
            fail(f"Secret {name} is created in namespace {ns}, the release is installed in {hns}")
    with open(manifest) as fh:
        docs = [d for d in yaml.safe_load_all(fh) if d]
    used = set()
    for d in docs:
        spec = d.get("spec", {})
        pod = spec.get("template", {}).get("spec") if d["kind"] in ("StatefulSet", "Deployment", "Job") else spec if d["kind"] == "Pod" else None
        if not pod:
            continue
        where = f"{d['kind']}/{d['metadata']['name']}"
        refs = []
        for v in pod.get("volumes", []):
            s = v.get("secret")
            if s:
                refs.append((s["secretName"], [i["key"] for i in s.get("items", [])], s.get("optional")))
            for src in v.get("projected", {}).get("sources", []):
                s = src.get("secret")
                if s:
                    refs.append((s["name"], [i["key"] for i in s.get("items", [])], s.get("optional")))
        for c in pod.get("containers", []) + pod.get("initContainers", []):
            for e in c.get("env", []):
                r = e.get("valueFrom", {}).get("secretKeyRef")
                if r:
                    refs.append((r["name"], [r["key"]], r.get("optional")))
            for e in c.get("envFrom", []):
                r = e.get("secretRef")
                if r:
                    refs.append((r["name"], [], r.get("optional")))
        for name, keys, optional in refs:
            if name not in created:
                if not optional:
                    fail(f"{where} needs Secret {name}, which the block's kubectl lines do not create")
                continue
            used.add(name)
            missing = [k for k in keys if k not in created[name][1]]
            if missing:
                fail(f"{where} reads keys {missing} of Secret {name}; the kubectl line creates {sorted(created[name][1])}")
    unused = sorted(set(created) - used)
    if unused:
        fail(f"the block creates Secrets {unused} that the rendered chart does not use")
    print(f"Secrets: {', '.join(f'{n} ({sorted(k)})' for n, (_, k) in sorted(created.items()))} created by the kubectl lines, as the chart mounts them")


if __name__ == "__main__":
    name, args = sys.argv[1], sys.argv[2:]
    globals()["cmd_" + name.replace("-", "_")](*args)
PY
py() { python3 "$WORK/readme.py" "$@"; }

# ---------------------------------------------------------------------------------------------
# Running a block: its shell in the background, stdout and stderr in files, a time limit.
start_block() { # start_block SLUG TITLE IDX CWD [gen options]
  local slug="$1" title="$2" idx="$3" cwd="$4"
  shift 4
  local st="$WORK/blocks/$slug"
  mkdir -p "$st"
  echo "$title" >"$st/title"
  py gen "$WORK/blocks.json" "$idx" "$st/block.sh" "$@"
  printf '\n== %s (README.md:%s)\n' "$title" "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[int(sys.argv[2])]["open"])' "$WORK/blocks.json" "$idx")"
  ND_BLOCK="$title" ND_STATE="$st" ND_CWD="$cwd" bash "$st/block.sh" >"$st/out" 2>"$st/err" </dev/null &
  echo $! >"$st/pid"
}
show_block() { # the end of a block's output, to tell why it failed
  local st="$WORK/blocks/$1"
  echo "--- stdout of [$(cat "$st/title")] (end):" >&2
  sed 's/^@@README.md:\([0-9]*\)@@$/[README.md:\1]/' "$st/out" | tail -n 25 | cut -c1-400 >&2
  echo "--- stderr (end):" >&2
  tail -n 25 "$st/err" | cut -c1-400 >&2
}
wait_done() { # wait_done SLUG SECONDS: the block's last line has run (its shell may hold a process)
  local st="$WORK/blocks/$1" limit="$2" t0=$SECONDS pid rc
  pid="$(cat "$st/pid")"
  while [ ! -e "$st/done" ]; do
    if ! kill -0 "$pid" 2>/dev/null; then
      rc=0
      wait "$pid" || rc=$?
      show_block "$1"
      die "[$(cat "$st/title")] failed (exit $rc) at README.md:$(cat "$st/line" 2>/dev/null || echo '?')"
    fi
    if ((SECONDS - t0 > limit)); then
      show_block "$1"
      die "[$(cat "$st/title")] did not finish in $limit s: it was at README.md:$(cat "$st/line" 2>/dev/null || echo '?')"
    fi
    sleep 0.2
  done
  if [ ! -s "$st/bg" ]; then release "$1" 30; fi
}
release() { # release SLUG SECONDS: SIGTERM what the block started; its shell and they must exit 0
  local st="$WORK/blocks/$1" limit="$2" t0=$SECONDS pid rc p prc
  pid="$(cat "$st/pid")"
  : >"$st/release"
  while kill -0 "$pid" 2>/dev/null; do
    if ((SECONDS - t0 > limit)); then
      show_block "$1"
      die "[$(cat "$st/title")]: what it started did not exit within $limit s of SIGTERM"
    fi
    sleep 0.2
  done
  rc=0
  wait "$pid" || rc=$?
  [ "$rc" -eq 0 ] || { show_block "$1"; die "[$(cat "$st/title")]: its shell exited $rc"; }
  if [ -s "$st/bg" ]; then
    while read -r p prc; do
      [ "$prc" -eq 0 ] || { show_block "$1"; die "[$(cat "$st/title")]: the process it started in the background exited $prc on SIGTERM"; }
      log "the process it started in the background exited 0 on SIGTERM"
    done <"$st/bg.exit"
  fi
  rm -f "$WORK/blocks/$1/pid"
}
out_of() { echo "$WORK/blocks/$1/out"; }
err_of() { echo "$WORK/blocks/$1/err"; }

# ---------------------------------------------------------------------------------------------
# The blocks, by heading.
py parse README.md "$WORK/blocks.json"
B_TOP="$(py find "$WORK/blocks.json" --top)"
B_QS="$(py find "$WORK/blocks.json" "Quick start")"
B_FILE="$(py find "$WORK/blocks.json" "Deduplicate a file")"
B_RUN="$(py find "$WORK/blocks.json" "Run between fetcher and indexer")"
B_HELM="$(py find "$WORK/blocks.json" "On Kubernetes with Helm")"
B_REPLAY="$(py find "$WORK/blocks.json" "Replay a topic")"
B_SERVE="$(py find "$WORK/blocks.json" "Serve result sets and explanations")"
B_DEV="$(py find "$WORK/blocks.json" "Development")"
py find "$WORK/blocks.json" --known "Quick start" "Deduplicate a file" "Run between fetcher and indexer" \
  "On Kubernetes with Helm" "Replay a topic" "Serve result sets and explanations" "Development"

# What they need, before anything starts.
for p in "$BROKER_PORT" "$CONTROLLER_PORT" "$HTTP_PORT"; do
  if port_taken "$p"; then
    die "port $p on 127.0.0.1 is taken: the README's stage needs a broker at 127.0.0.1:$BROKER_PORT (controller on $CONTROLLER_PORT) and listens on $HTTP_PORT; stop what holds it"
  fi
done
[ -f "$KAFKA_LIBS/.complete" ] || die "no Kafka jars in $KAFKA_LIBS: run bash scripts/install-deps.sh"
for t in java curl python3 node; do command -v "$t" >/dev/null || die "no $t: run bash scripts/install-deps.sh"; done
TOOLS="$(bash scripts/install-helm-tools.sh | tail -n 1)"
export NEARDUP_TOOLS_DIR="$TOOLS"

mapfile -t CLEAN_PATHS < <(py paths "$WORK/blocks.json" "$B_TOP" "$B_QS" "$B_FILE" "$B_RUN" "$B_REPLAY" "$B_SERVE")
log "removing what the blocks write under /tmp and /var/tmp: ${CLEAN_PATHS[*]}"
for p in "${CLEAN_PATHS[@]}"; do rm -rf -- "$p"; done

# The broker starts now and comes up while the file-mode blocks and the chart run.
mkdir -p "$WORK/broker"
bash scripts/kafka-broker.sh "$WORK/broker" "$BROKER_PORT" "$CONTROLLER_PORT" >"$WORK/broker/stdout.log" 2>&1 </dev/null &
BROKER_PID=$!

# ---------------------------------------------------------------------------------------------
# File mode: the top command's dedup, Quick start's explain, Deduplicate a file.
start_block top "top of the page: the file-mode run of the first command" "$B_TOP" "$ROOT" --top-dedup
wait_done top 60
py check-top "$WORK/blocks.json" "$B_TOP" "$(err_of top)"

start_block quick "Quick start" "$B_QS" "$ROOT"
wait_done quick 60
py check-explain "$WORK/blocks.json" "$B_QS" "$B_TOP" "$(out_of quick)"

start_block file "Deduplicate a file" "$B_FILE" "$ROOT"
wait_done file 60
py check-dedup "$WORK/blocks.json" "$B_FILE"
py check-keys "$WORK/blocks.json" "$B_FILE"

# ---------------------------------------------------------------------------------------------
# The chart: helm install as helm template, kubectl and helm test not run (no cluster here).
HELM_STATE="$WORK/helm"
mkdir -p "$HELM_STATE"
cat >"$WORK/shim/helm" <<'SH'
#!/usr/bin/env bash
set -euo pipefail
case "${1:-}" in
  install)
    shift
    printf '%s\0' "$@" >"$ND_HELM_STATE/install.args"
    echo "check-readme: no cluster here: helm install runs as helm template, same release, chart, namespace and values (Kubernetes $ND_KUBE)" >&2
    "$ND_HELM" template "$@" --kube-version "$ND_KUBE" --api-versions monitoring.coreos.com/v1 >"$ND_HELM_STATE/rendered.yaml"
    ;;
  test)
    echo "check-readme: skipped: helm $* (it runs the chart's test Pod in the cluster; there is none here, the Pod is rendered and validated instead)" >&2
    ;;
  *)
    echo "check-readme: the Helm block runs \`helm $1\`, which this script cannot run without a cluster" >&2
    exit 1
    ;;
esac
SH
cat >"$WORK/shim/kubectl" <<'SH'
#!/usr/bin/env bash
n=$(find "$ND_HELM_STATE" -name 'kubectl.*.args' | wc -l)
printf '%s\0' "$@" >"$ND_HELM_STATE/kubectl.$n.args"
echo "check-readme: skipped (no cluster here): kubectl $* (recorded, to check that the chart reads what it creates)" >&2
SH
chmod +x "$WORK/shim/helm" "$WORK/shim/kubectl"
(
  export PATH="$WORK/shim:$PATH" ND_HELM="$TOOLS/bin/helm" ND_HELM_STATE="$HELM_STATE" ND_KUBE="$KUBE"
  start_block helm "On Kubernetes with Helm" "$B_HELM" "$ROOT"
  wait_done helm 120
)
cat "$(err_of helm)"
[ -s "$HELM_STATE/rendered.yaml" ] || die "[On Kubernetes with Helm]: nothing rendered (no helm install line?)"
M="$HELM_STATE/rendered.yaml"
"$TOOLS/venv/bin/python" scripts/helm_checks.py split "$M" "$HELM_STATE/core.yaml" "$HELM_STATE/custom.yaml" ||
  die "[On Kubernetes with Helm]: cannot split the rendered manifest"
kv_out="$("$TOOLS/venv/bin/kubernetes-validate" -k "$KUBE" --strict --quiet "$HELM_STATE/core.yaml" 2>&1)" ||
  { echo "$kv_out" >&2; die "[On Kubernetes with Helm]: kubernetes-validate --strict rejects the rendering"; }
if grep -q WARN <<<"$kv_out"; then echo "$kv_out" >&2; die "[On Kubernetes with Helm]: kubernetes-validate warned about a core object"; fi
require=(--require StatefulSet --require ConfigMap --require Service)
for k in ServiceMonitor Job Deployment HorizontalPodAutoscaler; do
  grep -q "^kind: $k\$" "$M" && require+=(--require "$k")
done
node scripts/validate-crds.mjs "${require[@]}" "$M" >"$HELM_STATE/models.txt" ||
  { cat "$HELM_STATE/models.txt" >&2; die "[On Kubernetes with Helm]: kubernetes-models rejects the rendering"; }
"$TOOLS/venv/bin/yamllint" -c helm/yamllint.yaml "$M" || die "[On Kubernetes with Helm]: yamllint of the rendering"
"$TOOLS/venv/bin/python" scripts/helm_checks.py drift --bin "$NEARDUP_BIN" "$M" ||
  die "[On Kubernetes with Helm]: the drift check (the rendered command lines through --check-config)"
"$TOOLS/venv/bin/python" "$WORK/readme.py" check-helm-secrets "$HELM_STATE" "$M"
log "chart: $(grep -c '^kind:' "$M") objects rendered ($(grep '^kind:' "$M" | cut -d' ' -f2 | sort | uniq -c | awk '{printf "%s%s×%s", (NR>1?", ":""), $2, $1}')), valid: kubernetes-validate --strict, kubernetes-models, yamllint, drift"

# ---------------------------------------------------------------------------------------------
# The broker, the crawler's topic and its pages.
cat >"$WORK/KafkaTool.java" <<'JAVA'
import java.nio.file.*;
import java.time.Duration;
import java.util.*;
import java.util.regex.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.serialization.*;

/** The crawler's side, for the README check: create the input topic and produce pages to it
 *  (one record a line, round-robin over the partitions), or read topics to their end. */
public class KafkaTool {
  public static void main(String[] a) throws Exception {
    if (a[1].equals("setup")) setup(a[0], a[2], Integer.parseInt(a[3]), Paths.get(a[4]));
    else if (a[1].equals("read")) read(a[0], Integer.parseInt(a[2]), Arrays.copyOfRange(a, 3, a.length));
    else throw new IllegalArgumentException("unknown mode " + a[1]);
  }

  static void setup(String brokers, String topic, int partitions, Path pages) throws Exception {
    Properties p = new Properties();
    p.put("bootstrap.servers", brokers);
    try (Admin admin = Admin.create(p)) {
      admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get();
    }
    p.put("acks", "all");
    p.put("enable.idempotence", "true");
    p.put("max.request.size", "67108864");
    Pattern id = Pattern.compile("\"id\"\\s*:\\s*\"([^\"]*)\"");
    int n = 0;
    long[] ends = new long[partitions];
    try (KafkaProducer<String, String> prod =
        new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
      List<java.util.concurrent.Future<RecordMetadata>> acks = new ArrayList<>();
      for (String line : Files.readAllLines(pages)) {
        if (line.isBlank()) continue;
        Matcher m = id.matcher(line);
        acks.add(prod.send(new ProducerRecord<>(topic, n % partitions, m.find() ? m.group(1) : null, line)));
        n++;
      }
      for (var f : acks) {
        RecordMetadata md = f.get();
        ends[md.partition()] = Math.max(ends[md.partition()], md.offset() + 1);
      }
    }
    System.out.println("PRODUCED " + topic + " " + n);
    for (int i = 0; i < partitions; i++) System.out.println("END " + topic + " " + i + " " + ends[i]);
  }

  static void read(String brokers, int timeoutS, String[] topics) throws Exception {
    Properties p = new Properties();
    p.put("bootstrap.servers", brokers);
    p.put("enable.auto.commit", "false");
    p.put("isolation.level", "read_committed");
    p.put("max.partition.fetch.bytes", "67108864");
    try (KafkaConsumer<String, String> c =
        new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer())) {
      List<TopicPartition> tps = new ArrayList<>();
      for (String t : topics)
        for (PartitionInfo pi : c.partitionsFor(t, Duration.ofSeconds(30)))
          tps.add(new TopicPartition(t, pi.partition()));
      Map<TopicPartition, Long> end = c.endOffsets(tps, Duration.ofSeconds(30));
      c.assign(tps);
      c.seekToBeginning(tps);
      long deadline = System.currentTimeMillis() + timeoutS * 1000L;
      while (true) {
        boolean done = true;
        for (TopicPartition tp : tps) if (c.position(tp, Duration.ofSeconds(30)) < end.get(tp)) done = false;
        if (done) break;
        if (System.currentTimeMillis() > deadline)
          throw new RuntimeException("timed out reading " + String.join(",", topics));
        for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200)))
          System.out.println(r.topic() + "\t" + r.partition() + "\t" + r.offset() + "\t" + r.value());
      }
    }
  }
}
JAVA
cat >"$WORK/log4j2.properties" <<'PROPS'
status = error
appender.err.type = Console
appender.err.name = err
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = err
PROPS
kafka_tool() {
  timeout 120 java -Xmx256m -Dlog4j2.configurationFile="$WORK/log4j2.properties" -cp "$KAFKA_LIBS/*" \
    "$WORK/KafkaTool.java" "127.0.0.1:$BROKER_PORT" "$@"
}

printf '\n== the broker\n'
t0=$SECONDS
until port_taken "$BROKER_PORT"; do
  kill -0 "$BROKER_PID" 2>/dev/null || { tail -n 20 "$WORK/broker/stdout.log" "$WORK/broker/broker.log" >&2; die "the broker exited"; }
  ((SECONDS - t0 < 90)) || die "the broker did not listen on $BROKER_PORT within 90 s (see $WORK/broker/broker.log)"
  sleep 0.2
done
PAGES="$ROOT/examples/pages.jsonl"
kafka_tool setup pages 2 "$PAGES" >"$WORK/ends.txt" || die "cannot create the topic pages and produce $PAGES to it"
log "broker at 127.0.0.1:$BROKER_PORT (pid $BROKER_PID); the fetcher's part: $(grep PRODUCED "$WORK/ends.txt" | cut -d' ' -f3) pages of examples/pages.jsonl produced to pages (end offsets: $(grep END "$WORK/ends.txt" | awk '{printf "%s%s:%s=%s", (NR>1?", ":""), $2, $3, $4}'))"

# ---------------------------------------------------------------------------------------------
# Run between fetcher and indexer: in a directory of its own (it writes neardup.toml).
STAGE_DIR="$WORK/stage"
mkdir -p "$STAGE_DIR"
start_block run "Run between fetcher and indexer" "$B_RUN" "$STAGE_DIR"
wait_done run 120
npages="$(grep -c . "$PAGES")"
t0=$SECONDS
while :; do
  n="$(curl -s -m 5 "http://127.0.0.1:$HTTP_PORT/metrics" | awk '/^neardup_records_out_total/ {s += $NF} END {print s + 0}')"
  [ "$n" -ge "$npages" ] && break
  ((SECONDS - t0 < 60)) || { show_block run; die "[Run between fetcher and indexer]: $n of $npages pages answered after 60 s"; }
  sleep 0.5
done
kafka_tool read 60 pages-unique pages-duplicate pages-dead-letter >"$WORK/run.tsv" || die "cannot read the stage's output topics"
py check-run "$WORK/blocks.json" "$B_RUN" "$(out_of run)" "$WORK/run.tsv" "$B_FILE"
release run 60

# ---------------------------------------------------------------------------------------------
# Replay a topic: the stage stopped, the same broker, topics and neardup.toml.
plan="$(py replay-plan "$WORK/blocks.json" "$B_REPLAY" "$WORK/ends.txt")"
echo "$plan" >"$WORK/replay-plan.json"
subst=()
while IFS=$'\t' read -r old new line why; do
  [ -n "$old" ] || continue
  subst+=(--subst "$old" "$new")
  deviate "README.md:$line: --start $old names offsets at or past the end of a partition ($why): nothing to replay there; run with --start $new"
done < <(python3 -c 'import json,sys; [print("\t".join(map(str, s))) for s in json.loads(sys.argv[1])["subst"]]' "$plan")
while IFS=$'\t' read -r ut dt line; do
  [ -n "$ut" ] || continue
  deviate "README.md:$line: the replay writes to $ut and $dt, which the block does not create (the broker creates no topic on use): created first with \`neardup --config neardup.toml topics create --unique-topic $ut --duplicate-topic $dt --partitions 6 --replication-factor 1\`"
  (cd "$STAGE_DIR" && neardup --config neardup.toml topics create --unique-topic "$ut" --duplicate-topic "$dt" \
    --partitions 6 --replication-factor 1 >"$WORK/topics-$line.json") || die "cannot create $ut and $dt"
done < <(python3 -c 'import json,sys; [print("\t".join(map(str, c))) for c in json.loads(sys.argv[1])["create"]]' "$plan")
port_taken "$HTTP_PORT" && die "port $HTTP_PORT is still taken after the stage stopped"
start_block replay "Replay a topic" "$B_REPLAY" "$STAGE_DIR" "${subst[@]}"
wait_done replay 150
mapfile -t read_topics < <(python3 -c 'import json,sys; print("\n".join(json.loads(sys.argv[1])["read"]))' "$plan")
kafka_tool read 60 "${read_topics[@]}" >"$WORK/replay.tsv" || die "cannot read the replays' output topics"
py check-replay "$WORK/blocks.json" "$B_REPLAY" "$(out_of replay)" "$WORK/replay.tsv" "$WORK/replay-plan.json" "$B_FILE"

# ---------------------------------------------------------------------------------------------
# Serve result sets and explanations: as written, on the port the stage left.
port_taken "$HTTP_PORT" && die "port $HTTP_PORT is still taken after the replays"
start_block serve "Serve result sets and explanations" "$B_SERVE" "$ROOT"
wait_done serve 60
py check-serve "$WORK/blocks.json" "$B_SERVE" "$(out_of serve)" "$B_TOP"
release serve 30

printf '\n== Development (README.md:%s)\n' "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[int(sys.argv[2])]["open"])' "$WORK/blocks.json" "$B_DEV")"
log "skipped: the Development block is CI itself (.ci/run: the tests, the lints and the checks)"

printf '\n== summary: the README'"'"'s use cases ran and were checked in %s s\n' "$((SECONDS - started))"
if [ ${#DEVIATIONS[@]} -gt 0 ]; then
  # the README must run as written: a block that ran only changed fails the check
  echo "README DEVIATIONS (the README cannot run as written there; the script ran it changed):"
  for d in "${DEVIATIONS[@]}"; do echo "  - $d"; done
  exit 1
fi
ok=1
