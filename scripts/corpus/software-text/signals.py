#!/usr/bin/env python3
"""Rows of the software-text study: the replayed decision with each signal's flagged
signatures left out of matching.

Usage: signals.py NAME=CORPUS_WORKDIR [NAME=CORPUS_WORKDIR ...]

Each work directory holds the files run.sh makes: sign.jsonl, meta.jsonl, blocks.jsonl
(the page, as the tool signs it, and its blocks), all_words.jsonl, all_spotsigs.jsonl,
all_default.jsonl (the whole page signed, for S0 and S1), software_blocks.json and
block_sigs_{words,spotsigs,default}.jsonl (for S2). Prints one row per signal and corpus
and writes the by-kind table of each row to rows_NAME.txt in the work directory.

Signals (all streaming, decided from the pages seen so far, every page counted):
  baseline  nothing left out
  S0        a signature of the whole page carried by >= 5 hosts (rejected: it also takes
            wire-story text that many hosts print)
  S1        a whole-page signature that is template text (on two pages of one host whose
            signed sets are at Jaccard < 0.5) of >= 3 hosts (rejected: quotes reused across
            related stories turn template text of news hosts)
  S2F       software blocks (software_blocks.py: a visible block of <= 20 words that is
            template text of >= 3 hosts): the signatures of their texts are left out on the
            pages that carry them, fixed when the page is decided

Row columns: P R F1 over duplicate pairs; pred and tp pairs; forumFP(x-host), false pairs
between forum pages of different hosts; x-host-true rec, true cross-host wire/templated
pairs found; flagged-signed-sigs, signed signatures flagged at the end of the stream.
"""
import collections
import json
import os
import sys

from replay import NoFlag, fmt, jac, jsonl, load, run, score

ALL_PAGE = ('all_words.jsonl', 'all_spotsigs.jsonl', 'all_default.jsonl')
BLOCK_SIGS = ('block_sigs_words.jsonl', 'block_sigs_spotsigs.jsonl', 'block_sigs_default.jsonl')
NEVER = 1 << 30


def add_whole_page(pages, workdir):
    """p['AB']: the signed set with every signature of the whole page (three families)."""
    for fn in ALL_PAGE:
        rows = jsonl(os.path.join(workdir, fn))
        assert len(rows) == len(pages), fn
        for p, r in zip(pages, rows):
            assert r['id'] == p['id'], fn
            p['AB'] = p.get('AB', p['sigs']) | frozenset(r['strings'])


class HostCount(NoFlag):
    """S0: a whole-page signature carried by >= k hosts."""
    def __init__(s, k):
        s.k = k
        s.h = collections.defaultdict(set)

    def observe(s, p):
        for x in p['AB']:
            s.h[x].add(p['host'])

    def flagged(s, x):
        return len(s.h.get(x, ())) >= s.k


class TemplateHosts(NoFlag):
    """S1: a whole-page signature is template text of a host once it is on two pages of the
    host whose signed sets are at Jaccard < 0.5; flagged once template text of >= k hosts."""
    def __init__(s, k):
        s.k = k
        s.first = {}                      # (sig, host) -> signed set of its first page there
        s.tmpl = set()
        s.nh = collections.Counter()

    def observe(s, p):
        h = p['host']
        for x in p['AB']:
            key = (x, h)
            if key in s.tmpl:
                continue
            f = s.first.get(key)
            if f is None:
                s.first[key] = p['sigs']
            elif jac(f, p['sigs']) < 0.5:
                s.tmpl.add(key)
                s.nh[x] += 1

    def flagged(s, x):
        return s.nh.get(x, 0) >= s.k


class FrozenSoftwareBlocks(NoFlag):
    """S2F: a page's informative set leaves out the signatures of the software blocks it
    carries (those that are software at the time it is decided); fixed from then on."""
    def __init__(s, workdir):
        with open(os.path.join(workdir, 'software_blocks.json')) as f:
            s.bsince = {int(h): i for h, i in json.load(f)['since'].items()}
        s.bsigs = collections.defaultdict(set)
        for fn in BLOCK_SIGS:
            for r in jsonl(os.path.join(workdir, fn)):
                s.bsigs[int(r['id'])].update(r['strings'])
        s.since = {}                      # signature -> first time one of its blocks is software
        for h, i in s.bsince.items():
            for x in s.bsigs.get(h, ()):
                s.since[x] = min(s.since.get(x, NEVER), i)
        s.t = -1
        s.cache = {}

    def observe(s, p):
        s.t += 1

    def flagged(s, x):                    # used for the flagged-signed-sigs count only
        return s.since.get(x, NEVER) <= s.t

    def inf(s, p):
        r = s.cache.get(p['id'])
        if r is None:
            out = set()
            for b in p['blocks']:
                if s.bsince.get(b[0], NEVER) <= s.t:
                    out |= s.bsigs.get(b[0], set())
            r = s.cache[p['id']] = p['sigs'] - out
        return r


SIGNALS = [
    ('baseline', lambda w: NoFlag()),
    ('S0 hosts>=5 (all pages)', lambda w: HostCount(5)),
    ('S1 tmpl-content k=3 AB', lambda w: TemplateHosts(3)),
    ('S2F frozen-on-page k=3 <=20w', lambda w: FrozenSoftwareBlocks(w)),
]


def row(name, pages, flagger, label):
    sc = score(pages, run(pages, flagger))
    bk = sc['by_kind']
    forum_fp = sum(v[1] - v[2] for k, v in bk.items() if k.startswith('forum') and 'other hosts' in k)
    xh = [v for k, v in bk.items()
          if k.startswith(('wire', 'templated', 'real')) and 'other hosts' in k]
    nflag = sum(1 for p in pages for x in p['sigs'] if flagger.flagged(x))
    line = (f"{name:6s} {label:42s} P {sc['P']:.4f} R {sc['R']:.4f} F1 {sc['F1']:.4f}  "
            f"pred {sc['pred']} tp {sc['tp']}  forumFP(x-host) {forum_fp}  "
            f"x-host-true rec {sum(v[2] for v in xh)}/{sum(v[0] for v in xh)}  flagged-signed-sigs {nflag}")
    return line, sc


def main():
    args = sys.argv[1:]
    if not args or any('=' not in a for a in args):
        sys.exit(__doc__)
    for arg in args:
        name, workdir = arg.split('=', 1)
        pages = load(workdir)
        add_whole_page(pages, workdir)
        with open(os.path.join(workdir, f'rows_{name}.txt'), 'w') as out:
            for label, make in SIGNALS:
                line, sc = row(name, pages, make(workdir), label)
                print(line, flush=True)
                out.write(line + '\n' + fmt(sc) + '\n')


if __name__ == '__main__':
    main()
