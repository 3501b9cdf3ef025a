#!/usr/bin/env python3
"""Soak run: N generated records (default 1,000,000) through `neardup dedup`, streamed on
stdin, with a retention window. Every few seconds it samples the process's resident memory,
the records fed so far and the index size on disk, then prints the curve and checks that
memory stays flat after warm-up, throughput does not decay and the index size levels off.

The pages come from templates and a generated vocabulary (no third-party text): stories
with near-duplicate copies in other layouts, one fetch time per record advancing one day
every 10,000 records, so a 7-day window keeps about 70,000 records' worth of index.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time

SYL = ["ka", "lo", "mi", "ren", "tu", "sa", "vel", "dor", "pi", "nor", "gal", "fen", "ri",
       "mo", "tan", "bel", "cor", "du", "les", "van", "qui", "zo", "har", "pel"]
TEMPLATES = [
    ("<header><nav><a href=/>Home</a> <a href=/local>Local</a></nav></header><main><article>",
     "</article></main><footer>Contact us. Terms. Privacy.</footer>"),
    ("<div class=top><a href=/news>News</a> <a href=/sport>Sport</a></div><div id=story>",
     "</div><div class=ad>Advertisement: garden tools</div>"),
    ("<table><tr><td><a href=/>Front page</a></td></tr></table><section>",
     "</section><aside>Most read: <a href=/a>one</a></aside>"),
]


def word(rng):
    return "".join(rng.choice(SYL) for _ in range(rng.randint(2, 3)))


def story(seed):
    rng = random.Random(seed)
    paras = []
    for _ in range(12):
        w = [word(rng) for _ in range(9)]
        paras.append(f"<p>The {w[0]} {w[1]} was {w[2]} by the {w[3]} {w[4]} that said "
                     f"{w[5]} {w[6]} is {w[7]} {w[8]}.</p>")
    return paras


def records(n):
    """Record i: story i // 3 in template i % 3 (copies 1 and 2 edited slightly)."""
    day0 = 1_790_000_000
    for i in range(n):
        s, copy = divmod(i, 3)
        paras = story(s)
        if copy == 2:
            paras[5] = "<p>An editor's note was added to this story.</p>"
        head, foot = TEMPLATES[copy]
        html = f"<html><body>{head}<h1>Story {s}</h1>{''.join(paras)}{foot}</body></html>"
        t = day0 + (i // 10_000) * 86_400
        fetched = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
        yield json.dumps({"id": f"soak-{i}", "url": f"https://site{copy}.test/s/{s}",
                          "html": html, "fetched_at": fetched}) + "\n"


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None


def du(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--retention", default="7d")
    ap.add_argument("--bin", default=os.environ.get("NEARDUP_BIN", os.path.join(
        os.environ.get("CARGO_TARGET_DIR", "target"), "release", "neardup")))
    ap.add_argument("--interval", type=float, default=5.0)
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="neardup-soak-")
    index = os.path.join(work, "index")
    cmd = [args.bin, "dedup", "--input", "-", "--index", index, "--unique", os.devnull,
           "--duplicates", os.devnull, "--dead-letter", os.path.join(work, "dead.jsonl"),
           "--retention", args.retention, "--no-text", "--summary-json"]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    fed = [0]

    def feed():
        for r in records(args.records):
            proc.stdin.write(r.encode())
            fed[0] += 1
        proc.stdin.close()

    t = threading.Thread(target=feed, daemon=True)
    started = time.time()
    t.start()
    samples = []
    while proc.poll() is None:
        time.sleep(args.interval)
        rss = rss_kib(proc.pid)
        if rss is None:
            break
        samples.append((time.time() - started, fed[0], rss, du(index)))
        s = samples[-1]
        print(f"{s[0]:7.0f} s  {s[1]:>9,} records  RSS {s[2] / 1024:7.1f} MiB  "
              f"index {s[3] / 1e6:8.1f} MB", flush=True)
    summary = json.loads(proc.stdout.read() or b"{}")
    proc.wait()
    if proc.returncode != 0:
        sys.exit(f"neardup dedup exited with {proc.returncode}")
    print("summary:", json.dumps(summary))

    ok = True
    n = len(samples)
    if n < 6:
        sys.exit("too few samples to judge (run longer or lower --interval)")
    warm = samples[n // 5:]                   # after the first fifth
    rss = [s[2] for s in warm]
    growth = (rss[-1] - rss[0]) / 1024
    print(f"resident memory after warm-up: {min(rss) / 1024:.1f}–{max(rss) / 1024:.1f} MiB, "
          f"first→last {growth:+.1f} MiB")
    if max(rss) > 1.5 * min(rss) + 64 * 1024:
        print("FAIL: resident memory keeps growing")
        ok = False
    # throughput per fifth of the run
    rates = []
    for k in range(5):
        a, b = samples[k * n // 5], samples[min((k + 1) * n // 5, n - 1)]
        if b[0] > a[0]:
            rates.append((b[1] - a[1]) / (b[0] - a[0]))
    print("records/s per fifth of the run:", ", ".join(f"{r:,.0f}" for r in rates))
    if len(rates) >= 4 and rates[-2] < 0.6 * max(rates[1:3]):
        print("FAIL: throughput decays")
        ok = False
    sizes = [s[3] for s in warm]
    half = len(sizes) // 2
    print(f"index size: {sizes[0] / 1e6:.0f} MB after warm-up, {max(sizes[:half]) / 1e6:.0f} MB "
          f"max of the first half, {max(sizes[half:]) / 1e6:.0f} MB max of the second half")
    if summary.get("pages") != args.records:
        print(f"FAIL: {summary.get('pages')} pages decided of {args.records}")
        ok = False
    print("OK" if ok else "FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
