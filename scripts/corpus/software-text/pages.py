#!/usr/bin/env python3
"""Per-page inputs of the software-text kit, in one pass over a page corpus.

Usage: pages.py CORPUS OUTDIR [--max-words 20]

CORPUS is a page JSONL (plain or gzip: id, url, html, cluster, kind, ...). Writes, one line a
page in file order (the order `neardup sign` prints):

  OUTDIR/meta.jsonl         id, url, cluster, kind, source
  OUTDIR/blocks.jsonl       id; sample (the 32 smallest CRC-32s of the page's distinct block
                            texts, for the short-page template test); identity (hash of the
                            sorted block texts, digits left out); title (digits left out);
                            blocks [[crc32, words, link words], ...] in page order
  OUTDIR/block_texts.jsonl  one line per distinct block text of at most --max-words words:
                            crc32 (as a string) and text, first occurrence kept

The visible blocks come from an HTML parser walk that approximates the tool's block rules
(hidden and non-text elements skipped, a block ends at every block-level element). The page
bytes reach the parser as UTF-8 without a declared encoding, so pages without a charset tag
read as Latin-1; hashes and word counts are taken on that text (the study did the same), and
software_blocks.py repairs the text before it is signed.
"""
import argparse
import gzip
import hashlib
import json
import os
import re
import sys
import zlib

import lxml.html

SKIP = {'script', 'style', 'noscript', 'template', 'svg', 'iframe', 'head', 'object', 'embed',
        'canvas', 'select', 'option'}
BLOCK = set('address article aside blockquote body br center dd details dialog dir div dl dt '
            'fieldset figcaption figure footer form h1 h2 h3 h4 h5 h6 header hgroup hr html li '
            'main menu nav ol p pre section summary table tbody td tfoot th thead tr ul legend '
            'caption button label'.split())
WS = re.compile(r'\s+')
DIG = re.compile(r'[0-9]')


def blocks_of(html):
    """Visible blocks of a page: ([(text, link words), ...], title)."""
    try:
        root = lxml.html.fromstring(html.encode('utf-8', 'replace'))
    except Exception:
        return [], ''
    out, cur, curlink = [], [], [0]
    title = ''
    t = root.find('.//title')
    if t is not None and t.text:
        title = WS.sub(' ', t.text).strip()

    def flush():
        s = WS.sub(' ', ''.join(cur)).strip()
        if s:
            out.append((s, curlink[0]))
        cur.clear()
        curlink[0] = 0

    def walk(el, inlink):
        tag = el.tag if isinstance(el.tag, str) else None
        if tag is None:                       # comment or processing instruction
            if el.tail:
                cur.append(el.tail)
            return
        tag = tag.lower()
        if tag in SKIP or el.get('hidden') is not None:
            if el.tail:
                cur.append(el.tail)
            return
        isb = tag in BLOCK
        if isb:
            flush()
        lk = inlink or tag == 'a'
        if el.text:
            cur.append(el.text)
            if lk:
                curlink[0] += len(el.text.split())
        for c in el:
            walk(c, lk)
            if c.tail and lk:
                curlink[0] += len(c.tail.split())
        if isb:
            flush()
        if el.tail:
            cur.append(el.tail)

    try:
        walk(root, False)
    except RecursionError:
        pass
    flush()
    return out, title


def read_pages(path):
    f = gzip.open(path, 'rt', encoding='utf-8', newline='\n') if path.endswith('.gz') \
        else open(path, encoding='utf-8', newline='\n')
    with f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('corpus')
    ap.add_argument('outdir')
    ap.add_argument('--max-words', type=int, default=20,
                    help='longest block (words) whose text is kept for signing')
    a = ap.parse_args()
    sys.setrecursionlimit(100000)
    os.makedirs(a.outdir, exist_ok=True)
    texts = {}
    with open(os.path.join(a.outdir, 'meta.jsonl'), 'w') as fm, \
            open(os.path.join(a.outdir, 'blocks.jsonl'), 'w') as fb:
        for p in read_pages(a.corpus):
            fm.write(json.dumps({k: p.get(k) for k in ('id', 'url', 'cluster', 'kind', 'source')}) + '\n')
            bl, title = blocks_of(p['html'])
            hs = [zlib.crc32(s.encode()) for s, _ in bl]
            for h, (s, _) in zip(hs, bl):
                if h not in texts and len(s.split()) <= a.max_words:
                    texts[h] = s
            nod = [x for x in sorted(DIG.sub('', s).strip() for s, _ in bl) if x]
            tt = DIG.sub('', title).strip()
            fb.write(json.dumps(dict(
                id=p['id'], sample=sorted(set(hs))[:32],
                identity=hashlib.md5('\n'.join(nod).encode()).hexdigest()[:16],
                title=tt if tt else None,
                blocks=[[h, len(s.split()), lw] for h, (s, lw) in zip(hs, bl)])) + '\n')
    with open(os.path.join(a.outdir, 'block_texts.jsonl'), 'w') as ft:
        for h, s in texts.items():
            ft.write(json.dumps({'crc32': str(h), 'text': s}) + '\n')


if __name__ == '__main__':
    main()
