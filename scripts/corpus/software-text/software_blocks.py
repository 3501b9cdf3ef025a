#!/usr/bin/env python3
"""Software blocks of a corpus, found in stream order, and their texts to sign.

Usage: software_blocks.py CORPUS_WORKDIR [--hosts 3] [--max-words 20]

Reads sign.jsonl, meta.jsonl, blocks.jsonl and block_texts.jsonl of the work directory
(pages.py, run.sh). In file order, every page counted (duplicates included):

  - a visible block (its text hash) is template text of a host once it has been seen on two
    pages of that host whose signed sets are at Jaccard < 0.5 (different content);
  - it is a software block once it is template text of --hosts hosts and has at most
    --max-words words.

Writes into the work directory:
  software_blocks.json   {"since": {crc32: index of the page at which the block became
                         software}, "hosts": k, "max_words": n}
  software_texts.jsonl   one page per software block (id = crc32, html = the block text in
                         a paragraph), for `neardup sign` to give the block's signatures
"""
import argparse
import collections
import html
import json
import os

from replay import jac, load


def repair(s):
    """Undo the Latin-1 reading of UTF-8 text (see pages.py); unchanged when it is not that."""
    try:
        return s.encode('latin-1').decode('utf-8')
    except (UnicodeEncodeError, UnicodeDecodeError):
        return s


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('workdir')
    ap.add_argument('--hosts', type=int, default=3)
    ap.add_argument('--max-words', type=int, default=20)
    a = ap.parse_args()
    pages = load(a.workdir)
    first = {}                         # (block, host) -> signed set of its first page there
    tmpl = set()                       # (block, host) that turned template text
    nhosts = collections.Counter()     # block -> hosts where it is template text
    words = {}
    since = {}
    for i, p in enumerate(pages):
        for h, w, _ in p['blocks']:
            words[h] = w
            key = (h, p['host'])
            if key in tmpl:
                continue
            f = first.get(key)
            if f is None:
                first[key] = p['sigs']
            elif jac(f, p['sigs']) < 0.5:
                tmpl.add(key)
                nhosts[h] += 1
                if nhosts[h] == a.hosts:
                    since[h] = i
    since = {h: i for h, i in since.items() if words[h] <= a.max_words}
    with open(os.path.join(a.workdir, 'software_blocks.json'), 'w') as f:
        json.dump({'since': {str(h): i for h, i in since.items()}, 'hosts': a.hosts,
                   'max_words': a.max_words}, f)
    n = 0
    with open(os.path.join(a.workdir, 'block_texts.jsonl')) as fi, \
            open(os.path.join(a.workdir, 'software_texts.jsonl'), 'w') as fo:
        for line in fi:
            r = json.loads(line)
            if int(r['crc32']) in since:
                n += 1
                fo.write(json.dumps({'id': r['crc32'], 'url': 'http://x.example/',
                                     'html': '<p>' + html.escape(repair(r['text'])) + '</p>'}) + '\n')
    assert n == len(since), f'{len(since) - n} software block texts missing from block_texts.jsonl'
    print(f'{os.path.basename(os.path.normpath(a.workdir))}: {len(pages)} pages, {len(first)} (block, host) keys, '
          f'{len(tmpl)} template, {len(since)} software blocks (k={a.hosts}, <= {a.max_words} words)')


if __name__ == '__main__':
    main()
