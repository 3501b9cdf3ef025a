#!/usr/bin/env python3
"""News-like HTML pages for scale runs of `neardup dedup` (page JSONL on stdout).

    python3 scripts/synthetic-pages.py CORPUS.jsonl.gz N [SEED] > pages.jsonl

The text is sampled from a word-bigram model trained on the paragraphs of a real page corpus
(the dev corpus: `../shared/data/goldstyle-dev.jsonl.gz`), with rare names and numbers
sprinkled in so that every story has phrases of its own. Pages are laid out in one of 40
site templates (header, navigation, sidebar, footer, scripts). A fifth of the pages are
edited copies of a page among the last 20,000: another template, a dropped or added
paragraph, a few changed words. Nothing of the corpus is written out except words.
"""

import gzip
import html
import json
import random
import re
import sys

PARA = re.compile(r"<p[^>]*>(.*?)</p>", re.S | re.I)
TAG = re.compile(r"<[^>]+>")
WORD = re.compile(r"[A-Za-z][A-Za-z'-]*|[0-9]+|[.,;:]")


def train(path, max_pages=4000):
    nxt = {}
    starts = []
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i >= max_pages:
                break
            page = json.loads(line)
            for p in PARA.findall(page.get("html", "")):
                words = WORD.findall(html.unescape(TAG.sub(" ", p)))
                if len(words) < 8:
                    continue
                starts.append(words[0])
                for a, b in zip(words, words[1:]):
                    nxt.setdefault(a, []).append(b)
    return nxt, starts


def sentence_stream(rng, nxt, starts, story_words):
    w = rng.choice(starts)
    while True:
        yield w
        if rng.random() < 0.03:
            # a phrase of this story: a rare name or number
            w = rng.choice(story_words)
            yield w
        cands = nxt.get(w)
        w = rng.choice(cands) if cands else rng.choice(starts)


def story(rng, nxt, starts):
    story_words = [
        "".join(rng.choice("bcdfghjklmnprstvz") + rng.choice("aeiou") for _ in range(3)).title()
        for _ in range(6)
    ] + [str(rng.randint(10, 99999)) for _ in range(3)]
    n_par = max(1, int(rng.lognormvariate(1.8, 0.7)))
    gen = sentence_stream(rng, nxt, starts, story_words)
    paras = []
    for _ in range(n_par):
        k = rng.randint(25, 90)
        paras.append(" ".join(next(gen) for _ in range(k)))
    title = " ".join(next(gen) for _ in range(rng.randint(5, 10)))
    return title, paras


def templates(rng):
    out = []
    for t in range(40):
        nav = "".join(
            f'<li><a href="/section/{i}">Section {t}-{i}</a></li>' for i in range(rng.randint(5, 15))
        )
        side = "".join(
            f'<li><a href="/most-read/{i}">Most read story {t}-{i}</a></li>' for i in range(6)
        )
        out.append(
            (
                f'<!DOCTYPE html><html><head><title>{{title}} | Site {t}</title>'
                f"<script>var site={t};window.dataLayer=[];</script>"
                f"<style>.c{t}{{color:#333}}</style></head><body>"
                f'<header class="site-header"><a href="/">Site {t} News</a></header>'
                f'<nav class="menu"><ul>{nav}</ul></nav><div class="layout">'
                f'<article class="story"><h1>{{title}}</h1>{{body}}</article>'
                f'<aside class="sidebar"><ul>{side}</ul></aside></div>'
                f'<footer class="footer">Copyright Site {t}. <a href="/terms">Terms</a></footer>'
                f"</body></html>"
            )
        )
    return out


def edit(rng, paras):
    paras = list(paras)
    if len(paras) > 2 and rng.random() < 0.5:
        paras.pop(rng.randrange(len(paras)))
    if rng.random() < 0.3:
        paras.append("Editor's note: this story was updated with more details.")
    out = []
    for p in paras:
        words = p.split(" ")
        for _ in range(max(1, len(words) // 40)):
            words[rng.randrange(len(words))] = rng.choice(["said", "told", "reported", "new"])
        out.append(" ".join(words))
    return out


def main():
    path, n = sys.argv[1], int(sys.argv[2])
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    rng = random.Random(seed)
    nxt, starts = train(path)
    tmpls = templates(rng)
    recent = []
    out = sys.stdout
    for i in range(n):
        if recent and rng.random() < 0.2:
            title, paras = rng.choice(recent)
            paras = edit(rng, paras)
        else:
            title, paras = story(rng, nxt, starts)
            recent.append((title, paras))
            if len(recent) > 20000:
                recent.pop(0)
        body = "".join(f"<p>{html.escape(p)}</p>" for p in paras)
        page = rng.choice(tmpls).replace("{title}", html.escape(title)).replace("{body}", body)
        rec = {
            "id": f"syn-{seed}-{i}",
            "url": f"https://site{rng.randrange(40)}.example/news/{i}",
            "html": page,
            "fetched_at": "2026-11-23T00:00:00Z",
        }
        out.write(json.dumps(rec, ensure_ascii=False))
        out.write("\n")


if __name__ == "__main__":
    main()
