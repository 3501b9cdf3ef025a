#!/usr/bin/env python3
"""A labelled corpus of short wire items for `neardup eval` (page JSONL on stdout).

    python3 scripts/short-items.py CORPUS.jsonl.gz OUT_DIR [N] [SEED]

Writes OUT_DIR/short-items.jsonl (N pages, default 4000, with `cluster` labels) and
OUT_DIR/short-items-same_template_pairs.tsv (every pair of pages of one site that are not
copies of each other: the hard negatives), the files `neardup eval --corpus
OUT_DIR/short-items.jsonl` reads.

What it models is what the dev pages hold few of: photo captions and news briefs of 12 to
80 words, republished by other sites in their own templates with a word or two changed, a
dateline or a credit added. Half of the items are such short texts, the rest are stories of
a few paragraphs. Each of 40 sites has a template (header, navigation, sidebar, footer) and
a notice of its own that it prints inside the article on a third of its pages ("Follow …
for the latest …"), and three networks of sites share one promotional paragraph on some
pages: short pages of one site then share their notice, which is what must not make them
duplicates. A third of the items are later republished on 1 to 3 other sites. The text is
sampled from a word-bigram model trained on a real page corpus with rare names and numbers
sprinkled in; nothing of that corpus is written out except words.
"""

import html
import importlib.util
import json
import os
import random
import sys

SITES = 40


def train(path):
    """The word-bigram model of scripts/synthetic-pages.py, trained on `path`."""
    spec = importlib.util.spec_from_file_location(
        "synthetic_pages", os.path.join(os.path.dirname(os.path.abspath(__file__)), "synthetic-pages.py")
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.train(path)


def words(rng, nxt, starts, n, own):
    w = rng.choice(starts)
    out = []
    while len(out) < n:
        out.append(w)
        if rng.random() < 0.04:
            out.append(rng.choice(own))
        cands = nxt.get(w)
        w = rng.choice(cands) if cands else rng.choice(starts)
    return out[:n]


def name(rng):
    return "".join(rng.choice("bcdfghjklmnprstvz") + rng.choice("aeiou") for _ in range(3)).title()


def item(rng, nxt, starts):
    own = [name(rng) for _ in range(4)] + [str(rng.randint(10, 9999)) for _ in range(2)]
    if rng.random() < 0.5:
        n = int(rng.choice([rng.uniform(12, 30), rng.uniform(25, 80)]))
        return [" ".join(words(rng, nxt, starts, n, own))], "short"
    paras = [
        " ".join(words(rng, nxt, starts, rng.randint(25, 90), own))
        for _ in range(max(2, int(rng.lognormvariate(1.5, 0.6))))
    ]
    return paras, "story"


def edit(rng, paras, site):
    paras = list(paras)
    if len(paras) > 2 and rng.random() < 0.5:
        paras.pop(rng.randrange(len(paras)))
    out = []
    for p in paras:
        ws = p.split(" ")
        for _ in range(rng.randint(0, max(1, len(ws) // 30))):
            ws[rng.randrange(len(ws))] = rng.choice(["said", "told", "reported", "new", "local"])
        out.append(" ".join(ws))
    r = rng.random()
    if r < 0.3:
        out[0] = f"{name(rng).upper()} (Site {site}) - " + out[0]
    elif r < 0.5:
        out[-1] = out[-1] + f" Photo: {name(rng)} {name(rng)} for Site {site}."
    return out


def sites(rng, nxt, starts):
    out = []
    for t in range(SITES):
        nav = "".join(
            f'<li><a href="/section/{i}">Section {t}-{i}</a></li>' for i in range(rng.randint(5, 12))
        )
        side = "".join(
            f'<li><a href="/most-read/{i}">Most read story {t}-{i}</a></li>' for i in range(6)
        )
        tmpl = (
            f"<!DOCTYPE html><html><head><title>{{title}} | Site {t}</title>"
            f"<script>var site={t};</script></head><body>"
            f'<header class="site-header"><a href="/">Site {t} News</a></header>'
            f'<nav class="menu"><ul>{nav}</ul></nav><div class="layout">'
            f'<article class="story"><h1>{{title}}</h1>{{body}}</article>'
            f'<aside class="sidebar"><ul>{side}</ul></aside></div>'
            f'<footer class="footer">Copyright Site {t}. <a href="/terms">Terms</a></footer>'
            f"</body></html>"
        )
        notice = (
            f"Follow Site {t} for the latest news and photos from the region. "
            + " ".join(words(rng, nxt, starts, rng.randint(10, 20), [f"Site{t}"]))
            + "."
        )
        out.append((tmpl, notice, f"site{t}.example"))
    promos = [
        " ".join(words(rng, nxt, starts, 25, ["Network"])) + ". Subscribe today for all of it."
        for _ in range(3)
    ]
    return out, promos


def main():
    corpus, out_dir = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 4000
    rng = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else 7)
    nxt, starts = train(corpus)
    tmpls, promos = sites(rng, nxt, starts)
    os.makedirs(out_dir, exist_ok=True)
    pages = []  # (id, site, cluster)
    pending = []  # (due index, paras, title, cluster, sites used)
    with open(os.path.join(out_dir, "short-items.jsonl"), "w", encoding="utf-8") as f:
        for i in range(n):
            due = [p for p in pending if p[0] <= i]
            if due and rng.random() < 0.6:
                entry = due[0]
                pending.remove(entry)
                _, paras0, title, cluster, used = entry
                site = rng.choice([s for s in range(SITES) if s not in used])
                used.add(site)
                paras = edit(rng, paras0, site)
                if rng.random() < 0.4 and len(used) < 4:
                    pending.append((i + rng.randint(1, 300), paras0, title, cluster, used))
            else:
                paras, _ = item(rng, nxt, starts)
                site = rng.randrange(SITES)
                title = " ".join(words(rng, nxt, starts, rng.randint(4, 9), [name(rng)]))
                cluster = f"item:{i}"
                if rng.random() < 1 / 3:
                    pending.append((i + rng.randint(1, 300), paras, title, cluster, {site}))
            tmpl, notice, host = tmpls[site]
            body_paras = list(paras)
            if rng.random() < 1 / 3:
                body_paras.append(notice)
            if site % 4 == 0 and rng.random() < 0.25:
                body_paras.append(promos[site % 3])
            body = "".join(f"<p>{html.escape(p)}</p>" for p in body_paras)
            page = tmpl.replace("{title}", html.escape(title)).replace("{body}", body)
            pid = f"si-{i}"
            pages.append((pid, site, cluster))
            rec = {"id": pid, "url": f"https://{host}/news/{i}", "html": page, "cluster": cluster}
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    with open(os.path.join(out_dir, "short-items-same_template_pairs.tsv"), "w") as f:
        f.write("id_a\tid_b\n")
        by_site = {}
        for pid, site, cluster in pages:
            by_site.setdefault(site, []).append((pid, cluster))
        for members in by_site.values():
            for a in range(len(members)):
                for b in range(a + 1, len(members)):
                    if members[a][1] != members[b][1]:
                        f.write(f"{members[a][0]}\t{members[b][0]}\n")


if __name__ == "__main__":
    main()
