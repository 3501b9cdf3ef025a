#!/usr/bin/env python3
"""The MinHash-LSH baseline: how fast a user of the common Python libraries deduplicates the
pages `neardup dedup` reads, on one core, so that the project can state its per-core speed
against it (the "datasketch MinHashLSH" row of `../shared/data/README.md`).

    python3 -m pip install datasketch lxml
    python3 scripts/baseline-minhash.py [--input PAGES.jsonl[.gz]] [--limit N] [--repeat R] [--json]

    # the figure to compare with `neardup dedup --jobs 1`, pinned to one core:
    taskset -c 1 python3 scripts/baseline-minhash.py --input ../shared/data/goldstyle-dev.jsonl.gz

What one page costs, in input order, as such a user would write it:
  1. decode the JSON line (`id`, `url`, `html`);
  2. extract the text with lxml (`lxml.html.fromstring(html).text_content()`); a page lxml
     cannot parse (an empty `html` among them) is counted as a failure and skipped;
  3. lower-case the text, split it on whitespace and take the set of word 3-shingles (three
     words joined by a space, encoded to UTF-8);
  4. build a `datasketch.MinHash(num_perm=128)` of the set (`update_batch` where the installed
     version has it, else one `update` per shingle);
  5. query a `datasketch.MinHashLSH(threshold=0.5, num_perm=128)`: any candidate makes the page
     a duplicate, otherwise the page is inserted (streaming insert-and-query, one index).

Only steps 1–5 are timed. The input is read (and gunzipped) into memory first, split on b"\\n"
only (strings may hold U+2028 and other Unicode line separators), and measured there: the MB/s
figures count the JSONL bytes of the pages processed (newline included, so the whole file
gives its size) and, apart, the UTF-8 bytes of their HTML. MB is 10^6 bytes.

Pages of one or two words make a single shingle of those words; pages with no word at all
(after a successful parse) have no set to compare and are counted as `empty`, neither queried
nor inserted. Keys in the index are line numbers, so repeated ids do not stop the run.

`--repeat R` runs R times over the same lines in memory, a fresh index each time, and reports
each run and the best (the one with the fewest seconds). `--json` prints one JSON object on
stdout; otherwise a summary goes to stderr.
"""

import argparse
import gzip
import json
import os
import sys
import time

INSTALL = "python3 -m pip install datasketch lxml"
NUM_PERM = 128
THRESHOLD = 0.5
SHINGLE = 3
DEFAULT_INPUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                             "shared", "data", "goldstyle-dev.jsonl.gz")


def import_libraries():
    """The two libraries the baseline measures, or exit with how to install them."""
    missing = []
    try:
        import datasketch
    except ImportError:
        missing.append("datasketch")
    try:
        import lxml.html  # noqa: F401
    except ImportError:
        missing.append("lxml")
    if missing:
        sys.exit(f"baseline-minhash: missing Python package(s): {', '.join(missing)}\n"
                 f"install them with: {INSTALL}")
    import lxml.html
    return datasketch, lxml.html


def version(dist, module):
    try:
        from importlib.metadata import version as v
        return v(dist)
    except Exception:
        return getattr(module, "__version__", "unknown")


def read_lines(path, limit):
    """The first `limit` non-blank lines of `path` (all if None), as bytes with their newline.

    Binary file iteration splits on b"\\n" only, never on other line separators."""
    opener = gzip.open if path.endswith(".gz") else open
    lines = []
    with opener(path, "rb") as f:
        for line in f:
            if not line.strip():
                continue
            lines.append(line)
            if limit is not None and len(lines) >= limit:
                break
    return lines


def html_bytes(lines):
    """UTF-8 bytes of the `html` strings of `lines` (untimed; a line that does not decode
    counts 0)."""
    total = 0
    for line in lines:
        try:
            h = json.loads(line).get("html")
        except (ValueError, AttributeError):
            continue
        if isinstance(h, str):
            total += len(h.encode("utf-8", "surrogatepass"))
    return total


def run(lines, datasketch, lxml_html, batch):
    """One timed pass over `lines` with a fresh index: (seconds, duplicates, failures, empty)."""
    MinHash, MinHashLSH = datasketch.MinHash, datasketch.MinHashLSH
    fromstring = lxml_html.fromstring
    lsh = MinHashLSH(threshold=THRESHOLD, num_perm=NUM_PERM)
    duplicates = failures = empty = 0
    start = time.perf_counter()
    for key, line in enumerate(lines):
        # 1. the record
        try:
            html = json.loads(line).get("html")
        except (ValueError, AttributeError):
            failures += 1
            continue
        if not isinstance(html, str) or not html:
            failures += 1              # no HTML, or an empty string lxml would refuse
            continue
        # 2. the text; lxml raises on what it cannot parse (ParserError "Document is empty",
        # ValueError for a str carrying an XML encoding declaration, ...)
        try:
            text = fromstring(html).text_content()
        except Exception:
            failures += 1
            continue
        # 3. word 3-shingles
        words = text.lower().split()
        if not words:
            empty += 1
            continue
        if len(words) < SHINGLE:
            shingles = {" ".join(words).encode("utf-8", "surrogatepass")}
        else:
            shingles = {" ".join(words[i:i + SHINGLE]).encode("utf-8", "surrogatepass")
                        for i in range(len(words) - SHINGLE + 1)}
        # 4. the signature
        m = MinHash(num_perm=NUM_PERM)
        if batch:
            m.update_batch(shingles)
        else:
            for s in shingles:
                m.update(s)
        # 5. streaming insert-and-query
        if lsh.query(m):
            duplicates += 1
        else:
            lsh.insert(key, m)
    return time.perf_counter() - start, duplicates, failures, empty


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", default=DEFAULT_INPUT,
                    help="page JSONL, optionally .gz (default: ../shared/data/goldstyle-dev.jsonl.gz)")
    ap.add_argument("--limit", type=int, default=None, help="only the first N pages")
    ap.add_argument("--repeat", type=int, default=1, help="runs over the same lines (best reported)")
    ap.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    if args.limit is not None and args.limit < 1:
        ap.error("--limit must be at least 1")

    datasketch, lxml_html = import_libraries()
    import lxml
    batch = hasattr(datasketch.MinHash, "update_batch")
    if not os.path.exists(args.input):
        sys.exit(f"baseline-minhash: no input at {args.input} (pass --input PATH)")

    lines = read_lines(args.input, args.limit)
    if not lines:
        sys.exit(f"baseline-minhash: no pages in {args.input}")
    jsonl_mb = sum(len(line) for line in lines) / 1e6
    html_mb = html_bytes(lines) / 1e6
    pages = len(lines)

    runs = []
    for _ in range(args.repeat):
        seconds, duplicates, failures, empty = run(lines, datasketch, lxml_html, batch)
        runs.append({
            "seconds": round(seconds, 3),
            "pages_per_second": round(pages / seconds, 1),
            "jsonl_mb_per_second": round(jsonl_mb / seconds, 2),
            "html_mb_per_second": round(html_mb / seconds, 2),
            "duplicates": duplicates,
            "failures": failures,
            "empty": empty,
        })
        if not args.json:
            r = runs[-1]
            print(f"run {len(runs)}: {r['seconds']:.2f} s  {r['pages_per_second']:,.0f} pages/s  "
                  f"{r['jsonl_mb_per_second']:.1f} MB/s of JSONL  "
                  f"{r['html_mb_per_second']:.1f} MB/s of HTML  "
                  f"{duplicates} duplicates  {failures} failures  {empty} empty",
                  file=sys.stderr, flush=True)
    best = min(runs, key=lambda r: r["seconds"])

    summary = {
        "input": args.input,
        "pages": pages,
        "jsonl_mb": round(jsonl_mb, 3),
        "html_mb": round(html_mb, 3),
        **best,
        "runs": runs,
        "setting": {"num_perm": NUM_PERM, "threshold": THRESHOLD, "shingle_words": SHINGLE,
                    "update_batch": batch},
        "versions": {"python": sys.version.split()[0],
                     "datasketch": version("datasketch", datasketch),
                     "lxml": version("lxml", lxml)},
    }
    if args.json:
        print(json.dumps(summary))
    else:
        v = summary["versions"]
        print(f"best of {len(runs)}: {pages:,} pages ({jsonl_mb:.1f} MB of JSONL, "
              f"{html_mb:.1f} MB of HTML) in {best['seconds']:.2f} s: "
              f"{best['pages_per_second']:,.0f} pages/s, {best['jsonl_mb_per_second']:.1f} MB/s "
              f"of JSONL, {best['html_mb_per_second']:.1f} MB/s of HTML; "
              f"{best['duplicates']} duplicates, {best['failures']} failures, "
              f"{best['empty']} empty (datasketch {v['datasketch']}, lxml {v['lxml']}, "
              f"num_perm {NUM_PERM}, threshold {THRESHOLD}, word {SHINGLE}-shingles, "
              f"{'update_batch' if batch else 'update per shingle'})", file=sys.stderr)


if __name__ == "__main__":
    main()
