#!/usr/bin/env python3
"""Streaming replay of neardup's default decision, and pairwise scoring.

Usage: replay.py CORPUS_WORKDIR   (prints the baseline P/R/F1 and the by-kind table)

A corpus work directory holds (see run.sh):
  sign.jsonl    `neardup sign --strings` of the corpus (the signed set of each page)
  meta.jsonl    id, url, cluster, kind of each page (pages.py)
  blocks.jsonl  visible-block sample, identity, title and blocks of each page (pages.py)

The replay follows the default configuration (spotsigs, threshold 0.5, text rules 5) in
file order: a page with fewer than 10 signatures is unique and not indexed; otherwise it is
a duplicate of the earliest unique page of the same namespace with the highest Jaccard
>= 0.5 over the two informative sets. A short page (signed by word shingles) matches only a
page of another host and another template (block-sample similarity < 0.3), unless the two
pages are one item (same identity, or same title and same signed set). A page left with
fewer than 10 informative signatures is unique unless a candidate has its identity.

A flagger (see NoFlag) leaves signatures out of matching, on both sides of a pair; with
none the replay gives `neardup eval`'s figures on both corpora.
"""
import collections
import itertools
import json
import os
import sys


def host(u):
    h = u.split('//', 1)[-1].split('/')[0].split('?')[0].lower()
    h = h.split('@')[-1].split(':')[0]
    return h[4:] if h.startswith('www.') else h


def tsim(a, b, K=32):
    """Bottom-K similarity of two sorted block-hash samples."""
    k = max(K, len(a), len(b))
    if not a or not b:
        return 0.0
    i = j = seen = both = 0
    while seen < k and (i < len(a) or j < len(b)):
        x = a[i] if i < len(a) else None
        y = b[j] if j < len(b) else None
        if x is not None and y is not None and x == y:
            both += 1; i += 1; j += 1
        elif x is not None and (y is None or x < y):
            i += 1
        else:
            j += 1
        seen += 1
    return both / seen


def jac(a, b):
    i = len(a & b)
    return i / max(1, len(a) + len(b) - i)


def jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def load(workdir):
    """Pages of a corpus work directory, in file order."""
    meta = jsonl(os.path.join(workdir, 'meta.jsonl'))
    sig = jsonl(os.path.join(workdir, 'sign.jsonl'))
    blocks = jsonl(os.path.join(workdir, 'blocks.jsonl'))
    assert len(meta) == len(sig) == len(blocks), 'meta, sign and blocks disagree on the page count'
    pages = []
    for m, s, b in zip(meta, sig, blocks):
        assert m['id'] == s['id'] == b['id'], f"page order differs at {m['id']}"
        pages.append(dict(id=m['id'], url=m['url'], host=host(m['url']), cluster=m.get('cluster'),
                          kind=m.get('kind') or 'page', family=s['family'], strings=s['strings'],
                          sigs=frozenset(s['strings']), sample=b['sample'],
                          identity=b['identity'], title=b['title'], blocks=b['blocks']))
    return pages


def gold_pairs(pages):
    cl = collections.defaultdict(list)
    for p in pages:
        if p['cluster']:
            cl[p['cluster']].append(p['id'])
    return {tuple(sorted(x)) for g in cl.values() for x in itertools.combinations(g, 2)}


class NoFlag:
    """Flagger interface. observe(page) is called for every page in file order before its
    decision; inf(page) is the page's informative set (its signatures not left out)."""
    def observe(self, p):
        pass

    def flagged(self, s):
        return False

    def inf(self, p):
        return {s for s in p['sigs'] if not self.flagged(s)}


def run(pages, flagger=None, tau=0.5, min_sigs=10, min_informative=10):
    """Replay the decision; returns the predicted duplicate pairs (pairs of page ids)."""
    flagger = flagger or NoFlag()
    post = collections.defaultdict(list)   # (namespace, signature) -> unique page indexes
    canon = {}
    for i, p in enumerate(pages):
        flagger.observe(p)
        canon[i] = i
        if len(p['sigs']) < min_sigs:
            continue
        ns = 'w' if p['family'] == 'words' else 's'
        short = p['family'] != 'spotsigs'
        inf = flagger.inf(p)
        best, bj = None, 0.0
        if len(inf) >= min_informative:
            cnt = collections.Counter()
            for s in inf:
                for j in post.get((ns, s), ()):
                    cnt[j] += 1
            for j in cnt:
                q = pages[j]
                if short or q['family'] != 'spotsigs':
                    same_item = p['identity'] == q['identity'] or (
                        p['title'] and p['title'] == q['title'] and p['sigs'] == q['sigs'])
                    if not same_item:
                        if q['host'] == p['host']:
                            continue          # short pages match across hosts only
                        if short and tsim(p['sample'], q['sample']) >= 0.3:
                            continue          # ... and across templates only
                qinf = flagger.inf(q)
                inter = len(inf & qinf)
                j_ = inter / (len(inf) + len(qinf) - inter)
                if j_ >= tau and (j_ > bj or (j_ == bj and j < best)):
                    best, bj = j, j_
        else:
            # identity fallback: the earliest unique candidate page of the same identity
            cand = set()
            for s in p['sigs']:
                cand.update(post.get((ns, s), ()))
            for j in sorted(cand):
                if pages[j]['identity'] == p['identity']:
                    best = j
                    break
        if best is not None:
            canon[i] = best
        else:
            for s in p['sigs']:
                post[(ns, s)].append(i)
    groups = collections.defaultdict(list)
    for i, c in canon.items():
        groups[c].append(pages[i]['id'])
    return {tuple(sorted(x)) for g in groups.values() for x in itertools.combinations(g, 2)}


def kind_of(pa, pb):
    k = '+'.join(sorted({pa['kind'], pb['kind']}))
    return k + (', same host' if pa['host'] == pb['host'] else ', other hosts')


def score(pages, pred, gold=None):
    gold = gold if gold is not None else gold_pairs(pages)
    byid = {p['id']: p for p in pages}
    tp = len(pred & gold)
    P = tp / max(1, len(pred)); R = tp / max(1, len(gold)); F = 2 * P * R / max(1e-9, P + R)
    bk = collections.defaultdict(lambda: [0, 0, 0])   # kind -> gold, pred, tp
    for a, b in pred | gold:
        e = bk[kind_of(byid[a], byid[b])]
        if (a, b) in gold: e[0] += 1
        if (a, b) in pred: e[1] += 1
        if (a, b) in gold and (a, b) in pred: e[2] += 1
    return dict(pred=len(pred), gold=len(gold), tp=tp, P=P, R=R, F1=F,
                by_kind={k: tuple(v) for k, v in sorted(bk.items())})


def fmt(s):
    out = [f"pred {s['pred']} gold {s['gold']} tp {s['tp']} P {s['P']:.4f} R {s['R']:.4f} F1 {s['F1']:.4f}"]
    for k, (g, pr, tp) in s['by_kind'].items():
        out.append(f"   {k:32s} gold {g:4d} pred {pr:4d} tp {tp:4d}")
    return '\n'.join(out)


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    pages = load(sys.argv[1])
    print(fmt(score(pages, run(pages))))
