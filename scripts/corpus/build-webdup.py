#!/usr/bin/env python3
"""Build webdup-v1, a labelled near-duplicate corpus of real web pages.

Reads pages from local git snapshots of public repositories (at pinned commits), derives
the duplicate situations a crawler meets (aggregator copies, re-fetches, wire stories in
other sites' templates, mirrors, print/AMP/URL variants, product variants, forum and CMS
pages sharing software, short briefs) and writes, into OUT:

  webdup-v1.jsonl.gz                 one page a line: id, url, html, cluster, kind, source, lang
  webdup-v1-positive_pairs.tsv       id_a, id_b, kind, text_overlap, containment, cluster, same_host
  webdup-v1-same_template_pairs.tsv  negatives sharing a host, a forum software or a CMS theme
  webdup-v1-gray_pairs.tsv           negatives whose main texts overlap (5-shingle Jaccard >= 0.3)
  webdup-v1-manifest.tsv             every source file used: repo, commit, path, sha256, role
  webdup-v1-stats.json               counts per kind

Usage:
  build-webdup.py --mirrors MIRRORS --out CORPUS_DIR \
      [--exclude-corpus ../shared/data/goldstyle-dev.jsonl.gz] [--seed 20240607]

--edition v2 builds webdup-v2 (files webdup-v2*) from the snapshots in SOURCES_V2 instead: it drops
every source page whose registered domain has a page in an --exclude-corpus (repeat the option to give
the dev corpus and webdup-v1), has no forum or product pages, and takes the other kinds from the new pages.

--mirrors is a directory holding one git directory per snapshot at <owner>+<name>/repo
(override one with --snapshot owner/name=PATH). Every source is read at the commit pinned in
SOURCES below, so the output depends only on the inputs and the seed. Needs Python 3 and lxml.
"""

import argparse
import gzip
import hashlib
import html as htmlmod
import io
import itertools
import json
import os
import random
import re
import subprocess
import sys
import zlib
from collections import Counter, defaultdict

import lxml.html
from lxml import etree

SOURCES = {
    "adbar/trafilatura": "e90b0ef51ab026fdb905fb6c5b3c84dd3d784fd5",
    "flairNLP/fundus": "18da6e53592f99cf0ac5770dc63d6ba99ba63ae8",
    "postlight/parser": "e8ba7ece291efa4d915d50dd4deeec17d54359f2",
    "scrapinghub/product-extraction-benchmark": "cba97d7a8d42aeefd4021bc15d482f297faceaa3",
    "pythontech/ptforum": "8e2fa6076cf29d160a289cccb7f111608f3538ab",
    "imnotjames/pyawful": "61d83440717c7768e96a69490a6983390ddb9045",
    "Awful/Awful.app": "a5aad0d8c527d4afe24a072ea5da9be43b827848",
}

# webdup-v2 (--edition v2): pages of other repositories, whose hosts and templates are in neither
# webdup-v1 nor the dev corpus; no product or forum pages
SOURCES_V2 = {
    "mozilla/readability": "ab4027a8b37669745016869a37a504727992b2ba",
    "scrapinghub/article-extraction-benchmark": "4a3bc979f76c0df73cb95fe272e2fc1b96f9f010",
    "codelucas/newspaper": "1618b547f31c2d1fd19ae3b6afd8f7542dd02074",
    "goose3/goose3": "c5a8902eed0c4592a1ff5ec51a0277cf73a3aca7",
}
ALL_SOURCES = {**SOURCES, **SOURCES_V2}

GRAY_THRESHOLD = 0.3

# ----------------------------------------------------------------------------- snapshots


class Snapshot:
    def __init__(self, repo, gitdir, commit):
        self.repo, self.gitdir, self.commit = repo, gitdir, commit
        have = subprocess.run(["git", "--git-dir", gitdir, "cat-file", "-e", commit + "^{commit}"],
                              capture_output=True)
        if have.returncode != 0:
            sys.exit(f"{repo}: commit {commit} not in {gitdir}")
        out = subprocess.run(["git", "--git-dir", gitdir, "ls-tree", "-r", "-z", commit],
                             capture_output=True, check=True).stdout
        self.files = {}
        for rec in out.split(b"\0"):
            if not rec:
                continue
            meta, path = rec.split(b"\t", 1)
            mode, typ, sha = meta.split()
            if typ == b"blob" and mode != b"120000":
                self.files[path.decode("utf-8", "surrogateescape")] = sha.decode()

    def paths(self, prefix="", suffixes=()):
        return sorted(p for p in self.files if p.startswith(prefix)
                      and (not suffixes or p.endswith(tuple(suffixes))))

    def read(self, path):
        return subprocess.run(["git", "--git-dir", self.gitdir, "cat-file", "blob", self.files[path]],
                              capture_output=True, check=True).stdout


# ----------------------------------------------------------------------------- text helpers

META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)


def decode(raw):
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    if raw.startswith(b"\xef\xbb\xbf"):
        return raw[3:].decode("utf-8", "replace")
    m = META_CHARSET.search(raw[:4096])
    enc = m.group(1).decode("ascii", "ignore").lower() if m else ""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        pass
    for e in (enc, "cp1252"):
        if not e or e.startswith("utf"):
            continue
        try:
            return raw.decode(e)
        except (LookupError, UnicodeDecodeError):
            continue
    return raw.decode("latin-1")


def parse(html):
    html = re.sub(r"^\s*<\?xml[^>]*\?>", "", html)
    try:
        return lxml.html.document_fromstring(html)
    except (etree.ParserError, ValueError):
        return None


def serialize(doc):
    return etree.tostring(doc.getroottree(), encoding="unicode", method="html", doctype="<!DOCTYPE html>")


SKIP_ANCESTORS = {"script", "style", "noscript", "template", "svg", "nav", "footer", "aside", "form",
                  "select", "button", "iframe", "head"}
BLOCK_TAGS = {"p", "h2", "h3", "h4", "h5", "li", "blockquote", "pre", "dd"}
WORD = re.compile(r"\w+", re.U)


def norm_space(s):
    return re.sub(r"\s+", " ", s or "").strip()


def skipped(el):
    for a in el.iterancestors():
        if not isinstance(a.tag, str):
            continue
        if a.tag in SKIP_ANCESTORS:
            return True
        cls = ((a.get("class") or "") + " " + (a.get("id") or "")).lower()
        if re.search(r"\b(comment|sidebar|related|footer|cookie|newsletter|share|social|teaser|promo)", cls):
            return True
    return False


def link_density(el, text):
    lt = sum(len(norm_space(a.text_content())) for a in el.iter("a"))
    return lt / max(1, len(text))


def main_element(doc):
    """The element holding the main text: the parent that collects most paragraph text."""
    scores = Counter()
    order = {}
    for i, el in enumerate(doc.iter()):
        order[el] = i
    for el in doc.iter("p", "pre", "blockquote"):
        text = norm_space(el.text_content())
        if len(text) < 25 or skipped(el) or link_density(el, text) > 0.5:
            continue
        n = min(len(text), 1000)
        parent = el.getparent()
        if parent is None:
            continue
        scores[parent] += n
        gp = parent.getparent()
        if gp is not None:
            scores[gp] += n / 2
    if not scores:
        return None
    for el in list(scores):
        tag = el.tag if isinstance(el.tag, str) else ""
        cls = ((el.get("class") or "") + " " + (el.get("id") or "") + " " + (el.get("itemprop") or "")).lower()
        if tag in ("article", "main") or re.search(r"articlebody|article-body|entry-content|post-content|story-body|article__body|article-text", cls):
            scores[el] *= 1.25
    return max(scores, key=lambda e: (scores[e], -order.get(e, 0)))


def paragraphs_of(el):
    out = []
    for b in el.iter(*BLOCK_TAGS):
        if any(isinstance(d.tag, str) and d.tag in BLOCK_TAGS for d in b.iterdescendants()):
            continue
        if skipped(b):
            # only ancestors inside el count; a main element inside e.g. a <form> is fine
            bad = False
            for a in b.iterancestors():
                if a is el:
                    break
                if isinstance(a.tag, str) and a.tag in SKIP_ANCESTORS:
                    bad = True
                    break
            if bad:
                continue
        t = norm_space(b.text_content())
        if len(WORD.findall(t)) >= 1 and link_density(b, t) <= 0.5:
            out.append(t)
    return out


def title_of(doc):
    for xp in ("//meta[@property='og:title']/@content", "//h1", "//title"):
        r = doc.xpath(xp)
        if r:
            t = norm_space(r[0] if isinstance(r[0], str) else r[0].text_content())
            if t:
                return t
    return ""


def words(text):
    return WORD.findall(text.lower())


def shingles(text, k=5):
    w = words(text)
    if len(w) < k:
        return {zlib.crc32(" ".join(w).encode())} if w else set()
    return {zlib.crc32(" ".join(w[i:i + k]).encode()) for i in range(len(w) - k + 1)}


def jaccard(a, b):
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def containment(a, b):
    if not a or not b:
        return 0.0
    return len(a & b) / min(len(a), len(b))


STOP = {
    "en": set("the and of to in is that for it was on with as are be this by have from at not but".split()),
    "de": set("der die und das ist nicht den mit sich von auf für ein eine zu im dem des auch wird".split()),
    "fr": set("le la les et des est une pour dans que qui pas sur au du avec plus".split()),
    "es": set("el la los las y que en del por con una para es se lo como más".split()),
    "pl": set("i w na nie się z do że to jest jak o po tym przez dla".split()),
    "it": set("il di che e la per un una non sono gli del della con".split()),
}


def lang_of(text):
    w = words(text)[:2000]
    if len(w) < 20:
        return "und"
    best = max(STOP, key=lambda l: sum(1 for x in w if x in STOP[l]))
    if sum(1 for x in w if x in STOP[best]) / len(w) < 0.05:
        return "other"
    return best


def host_of(url):
    m = re.match(r"https?://([^/?#]+)", url or "")
    return m.group(1).lower() if m else ""


def reg_domain(host):
    parts = host.split(".")
    if len(parts) >= 3 and parts[-2] in ("co", "com", "org", "ac", "gov", "net") and len(parts[-1]) == 2:
        return ".".join(parts[-3:])
    return ".".join(parts[-2:])


# ----------------------------------------------------------------------------- source pages


class Page:
    __slots__ = ("pid", "url", "html", "cluster", "kind", "source", "lang", "main", "tkey", "note")

    def __init__(self, url, html, source, kind="page", cluster=None, main=None, tkey=None, note=""):
        self.pid = None
        self.url, self.html, self.source, self.kind, self.cluster = url, html, source, kind, cluster
        self.main, self.tkey, self.note = main, tkey, note
        self.lang = None


class Src:
    """A real source page with its parsed main text."""

    def __init__(self, repo, path, raw, html, url, origin):
        self.repo, self.path, self.raw, self.html, self.url = repo, path, raw, html, url
        self.origin = origin  # article | product | forum
        self.sha = hashlib.sha256(raw).hexdigest()
        self.host = host_of(url)
        self.doc = parse(html)
        self.title = title_of(self.doc) if self.doc is not None else ""
        self.main_el = main_element(self.doc) if self.doc is not None else None
        self.paras = paragraphs_of(self.main_el) if self.main_el is not None else []
        self.text = "\n".join(self.paras)
        self.nwords = len(words(self.text))
        self.lang = lang_of(self.text)
        self.theme = None
        m = re.search(r"wp-content/themes/([A-Za-z0-9_-]+)", html)
        if m and m.group(1) not in ("pub", "assets", "vip"):
            self.theme = "wordpress:" + m.group(1).lower()
        self.roles = []


TLDS = {"com", "de", "org", "net", "at", "fr", "uk", "ch", "info", "eu", "io", "es", "it", "pl", "nl",
        "be", "cl", "fi", "cz", "co", "blog", "me", "tv", "ca", "us", "ru", "jp", "br", "mx", "ar",
        "au", "in", "se", "no", "dk", "pt", "gr", "hu", "ro", "sk", "si", "hr", "lu", "li", "ie", "nz",
        "za", "gov", "edu", "news", "online", "media"}


def url_from_html(html):
    for pat in (r"""<link[^>]+rel=["']canonical["'][^>]+href=["']([^"']+)""",
                r"""<link[^>]+href=["']([^"']+)["'][^>]+rel=["']canonical""",
                r"""<meta[^>]+property=["']og:url["'][^>]+content=["']([^"']+)""",
                r"""<meta[^>]+content=["']([^"']+)["'][^>]+property=["']og:url"""):
        m = re.search(pat, html[:200000], re.I)
        if m and m.group(1).startswith(("http://", "https://")):
            return htmlmod.unescape(m.group(1)).strip()
    return None


def url_from_name(name):
    base = os.path.basename(name)
    base = re.sub(r"\.(html?|testhtml)(\.gz)?$", "", base)
    toks = re.split(r"[.]", base)
    for i, t in enumerate(toks):
        tt = t.split("-")[0]
        if i > 0 and tt.lower() in TLDS:
            host = ".".join(toks[:i] + [tt])
            rest = "-".join([t[len(tt) + 1:]] if len(t) > len(tt) else []) + "/".join(toks[i + 1:])
            slug = re.sub(r"[^A-Za-z0-9_-]+", "-", rest).strip("-") or "index"
            return f"https://{host.lower()}/{slug}"
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", base).strip("-").lower()[:60] or "page"
    return f"https://unknown-{hashlib.sha1(base.encode()).hexdigest()[:8]}.example/{slug}"


def load_sources(snaps):
    out = []
    # trafilatura: tests/cache and tests/eval; 32-hex names are the article-extraction benchmark
    s = snaps["adbar/trafilatura"]
    for p in s.paths("tests/cache/", (".html",)) + s.paths("tests/eval/", (".html", ".htm")):
        if re.search(r"/[0-9a-f]{32}\.html$", p):
            continue
        raw = s.read(p)
        html = decode(raw)
        out.append(Src(s.repo, p, raw, html, url_from_html(html) or url_from_name(p), "article"))
    # fundus: test pages with their URLs in meta.info
    s = snaps["flairNLP/fundus"]
    base = "tests/resources/parser/test_data/"
    metas = {}
    for p in s.paths(base, ("meta.info",)):
        try:
            metas[os.path.dirname(p)] = json.loads(s.read(p))
        except ValueError:
            metas[os.path.dirname(p)] = {}
    for p in s.paths(base, (".html.gz",)):
        meta = metas.get(os.path.dirname(p), {}).get(os.path.basename(p), {})
        raw = s.read(p)
        html = decode(raw)
        url = meta.get("url") or url_from_html(html) or url_from_name(p)
        out.append(Src(s.repo, p, raw, html, url, "article"))
    # postlight/parser fixtures
    s = snaps["postlight/parser"]
    for p in s.paths("fixtures/", (".html",)):
        raw = s.read(p)
        html = decode(raw)
        url = url_from_html(html)
        if not url:
            d = p[len("fixtures/"):]
            host = d.split("/")[0] if "/" in d else re.sub(r"(--.*)?\.html$", "", d)
            if "." not in host:
                host += ".com"
            url = f"https://{host}/{hashlib.sha1(p.encode()).hexdigest()[:10]}"
        out.append(Src(s.repo, p, raw, html, url, "article"))
    # product pages with their ground truth (URL, SKU)
    s = snaps["scrapinghub/product-extraction-benchmark"]
    gt = json.loads(s.read("dataset/ground-truth.json"))
    for p in s.paths("dataset/html/", (".html.gz",)):
        key = os.path.basename(p)[:-len(".html.gz")]
        g = gt.get(key, {})
        raw = s.read(p)
        html = decode(raw)
        src = Src(s.repo, p, raw, html, g.get("url") or url_from_name(p), "product")
        src.product = g
        if src.doc is not None:
            src.text = product_text(src.doc)
            src.paras = src.text.split("\n")
            src.nwords = len(words(src.text))
        out.append(src)
    return out


def host_guess(name):
    """A URL for a saved page named after its site: 'bbc-1', 'cricket.com.au2', 'test_guardian1'."""
    base = re.sub(r"^test_", "", re.sub(r"\.(html?)(\.gz)?$", "", os.path.basename(name)))
    base = re.sub(r"[-_]?\d+$", "", base).lower()
    if "." not in base:
        base = re.sub(r"[^a-z0-9-]+", "-", base).strip("-") + ".com"
    return f"https://{base}/{hashlib.sha1(name.encode()).hexdigest()[:10]}"


def load_sources_v2(snaps):
    out = []
    # test pages of the reader view: test/test-pages/<site>/source.html
    s = snaps["mozilla/readability"]
    for p in s.paths("test/test-pages/", ("/source.html",)):
        raw = s.read(p)
        html = decode(raw)
        out.append(Src(s.repo, p, raw, html, url_from_html(html) or host_guess(p.split("/")[-2]), "article"))
    # article-extraction benchmark: html/<sha256>.html.gz with the URL in the ground truth
    s = snaps["scrapinghub/article-extraction-benchmark"]
    gt = json.loads(s.read("ground-truth.json"))
    for p in s.paths("html/", (".html.gz",)):
        key = os.path.basename(p)[:-len(".html.gz")]
        raw = s.read(p)
        html = decode(raw)
        out.append(Src(s.repo, p, raw, html, gt.get(key, {}).get("url") or url_from_html(html) or host_guess(p),
                       "article"))
    # newspaper test pages: tests/data/html/<host><n>.html (two articles of most hosts)
    s = snaps["codelucas/newspaper"]
    for p in s.paths("tests/data/html/", (".html",)):
        if re.search(r"(meta_refresh|main_site)", p):
            continue
        raw = s.read(p)
        html = decode(raw)
        out.append(Src(s.repo, p, raw, html, url_from_html(html) or host_guess(p), "article"))
    # goose3 content tests: tests/data/{content,tags}/test_*.html with the URL in the .json beside
    s = snaps["goose3/goose3"]
    for p in s.paths("tests/data/content/", (".html",)) + s.paths("tests/data/tags/", (".html",)):
        url = None
        jp = p[:-len(".html")] + ".json"
        if jp in s.files:
            try:
                url = json.loads(s.read(jp)).get("url")
            except ValueError:
                url = None
        raw = s.read(p)
        html = decode(raw)
        out.append(Src(s.repo, p, raw, html, url or url_from_html(html) or host_guess(p), "article"))
    # unit-test pages of filler text are no site's pages; a page saved twice under one URL is kept once
    kept, seen = [], set()
    for src in out:
        u = src.url.split("#")[0].rstrip("/")
        if "lorem ipsum" in src.html.lower() or u in seen:
            continue
        seen.add(u)
        kept.append(src)
    return kept


def host_filter(srcs, paths):
    """Drops source pages whose registered domain has a page in an excluded corpus (new hosts only)."""
    doms = set()
    for path in paths or ():
        with gzip.open(path, "rt", encoding="utf-8", newline="\n") as f:
            for line in f:
                if line.strip():
                    doms.add(reg_domain(host_of(json.loads(line)["url"])))
    keep, dropped = [], 0
    for s in srcs:
        if reg_domain(s.host) in doms:
            dropped += 1
            s.roles.append("excluded:host-in-excluded-corpus")
            continue
        keep.append(s)
    return keep, dropped


# ----------------------------------------------------------------------------- exclusion of the dev corpus


def dev_filter(srcs, paths):
    """Drops source pages whose main text is (mostly) in an excluded corpus, or whose HTML or URL is."""
    if isinstance(paths, str):
        paths = [paths]
    paths = [p for p in (paths or []) if p and os.path.exists(p)]
    if not paths:
        print("no exclusion corpus given: skipping the overlap check", file=sys.stderr)
        return srcs, 0
    sample = defaultdict(list)
    hashes, urls = set(), set()
    n = 0
    for path in paths:
        with gzip.open(path, "rt", encoding="utf-8", newline="\n") as f:
            for line in f:
                if not line.strip():
                    continue
                d = json.loads(line)
                hashes.add(hashlib.sha256(d["html"].encode()).hexdigest())
                urls.add(d["url"].split("#")[0].rstrip("/"))
                doc = parse(d["html"])
                if doc is None:
                    continue
                el = main_element(doc)
                text = "\n".join(paragraphs_of(el)) if el is not None else ""
                for h in shingles(text):
                    if h % 4 == 0:
                        sample[h].append(n)
                n += 1
    keep, dropped = [], 0
    for s in srcs:
        sh = [h for h in shingles(s.text) if h % 4 == 0]
        hits = Counter()
        for h in sh:
            for j in set(sample.get(h, ())):
                hits[j] += 1
        best = max(hits.values()) / len(sh) if hits and sh else 0.0
        if s.sha in hashes or hashlib.sha256(s.html.encode()).hexdigest() in hashes \
                or s.url.split("#")[0].rstrip("/") in urls or (len(sh) >= 10 and best >= 0.5):
            dropped += 1
            s.roles.append("excluded:in-dev-corpus")
            continue
        keep.append(s)
    return keep, dropped


def dedup_sources(srcs):
    """Keeps one of source pages whose main texts are near-identical (the first by repo/path)."""
    index = defaultdict(list)
    keep = []
    for s in sorted(srcs, key=lambda s: (s.repo, s.path)):
        sh = shingles(s.text)
        s_sample = [h for h in sh if h % 4 == 0]
        cand = Counter()
        for h in s_sample:
            for j in index.get(h, ()):
                cand[j] += 1
        dup = False
        s.overlaps = False
        for j, c in cand.most_common(10):
            jj = jaccard(sh, shingles(keep[j].text))
            if jj >= 0.8 and len(sh) >= 20:
                dup = True
                s.roles.append(f"excluded:duplicate-of:{keep[j].repo}:{keep[j].path}")
                break
            if jj >= GRAY_THRESHOLD:
                s.overlaps = True
                keep[j].overlaps = True
        if dup:
            continue
        for h in s_sample:
            index[h].append(len(keep))
        keep.append(s)
    return keep


# ----------------------------------------------------------------------------- page builders


def set_url_bits(html, new_url):
    """Rewrites canonical / og:url / twitter:url values to new_url (what differs between the copies)."""
    def sub(m):
        return m.group(1) + htmlmod.escape(new_url, quote=True) + m.group(3)
    pats = [r"""(<link[^>]+rel=["']canonical["'][^>]*href=["'])([^"']*)(["'])""",
            r"""(<link[^>]+href=["'])([^"']*)(["'][^>]*rel=["']canonical["'])""",
            r"""(<meta[^>]+property=["']og:url["'][^>]*content=["'])([^"']*)(["'])""",
            r"""(<meta[^>]+content=["'])([^"']*)(["'][^>]*property=["']og:url["'])""",
            r"""(<meta[^>]+name=["']twitter:url["'][^>]*content=["'])([^"']*)(["'])"""]
    for p in pats:
        html = re.sub(p, sub, html, count=1, flags=re.I)
    return html


def url_variant(url, rng, style):
    base = url.split("#")[0]
    path = re.sub(r"^https?://[^/]+", "", base) or "/"
    host = host_of(url)
    slug = [x for x in path.split("?")[0].split("/") if x]
    last = slug[-1] if slug else "index"
    n = rng.randrange(10000, 999999)
    if style == "utm":
        src = rng.choice(["twitter", "facebook", "newsletter", "rss", "flipboard", "linkedin"])
        sep = "&" if "?" in base else "?"
        return f"{base}{sep}utm_source={src}&utm_medium=social&utm_campaign=c{n % 997}"
    if style == "session":
        sep = "&" if "?" in base else "?"
        return f"{base}{sep}sessionid={hashlib.md5(str(n).encode()).hexdigest()}"
    if style == "id":
        return f"https://{host}/index.php?id={n}"
    if style == "section":
        sec = rng.choice(["news", "top-stories", "latest", "featured", "archive", "topics/world", "lifestyle", "local"])
        return f"https://{host}/{sec}/{last}"
    if style == "mobile":
        return f"https://{host}/m{path}"
    if style == "amp":
        return f"https://{host}{path.rstrip('/')}/amp" if "?" not in path else f"https://{host}/amp{path}"
    if style == "print":
        sep = "&" if "?" in base else "?"
        return f"{base}{sep}print=1" if rng.random() < 0.5 else f"https://{host}/print{path}"
    if style == "page":
        sep = "&" if "?" in base else "?"
        return f"{base}{sep}page=1"
    if style == "story":
        return f"https://{host}/story/{n}/{last}"
    if style == "trailing":
        return base + ("/" if not base.endswith("/") else "index.html")
    raise ValueError(style)


DATE_PATTERNS = [
    (re.compile(r"\b(20[0-2]\d)-(0[1-9]|1[0-2])-([0-2]\d)\b"), "iso"),
    (re.compile(r"\b([0-2]?\d)\.(0?[1-9]|1[0-2])\.(20[0-2]\d)\b"), "dot"),
]


def shift_dates(html, rng):
    """Moves the dates in the page by a few days (an updated timestamp on re-fetch)."""
    days = rng.randint(1, 9)
    count = [0]

    def iso(m):
        count[0] += 1
        d = min(28, int(m.group(3)) + days) if int(m.group(3)) + days <= 28 else max(1, int(m.group(3)) - days)
        return f"{m.group(1)}-{m.group(2)}-{d:02d}"

    def dot(m):
        count[0] += 1
        d = int(m.group(1)) + days if int(m.group(1)) + days <= 28 else max(1, int(m.group(1)) - days)
        return f"{d:02d}.{m.group(2)}.{m.group(3)}"
    html = DATE_PATTERNS[0][0].sub(iso, html)
    html = DATE_PATTERNS[1][0].sub(dot, html)
    return html, count[0]


def insert_after_body(html, snippet):
    m = re.search(r"<body[^>]*>", html, re.I)
    if not m:
        return snippet + html
    return html[:m.end()] + snippet + html[m.end():]


def insert_before_body_end(html, snippet):
    i = html.lower().rfind("</body>")
    if i < 0:
        return html + snippet
    return html[:i] + snippet + html[i:]


def refetch(src, rng, k):
    """A re-fetch of the same page: date, counters, sidebar order or ad slot changed."""
    html = src.html
    changes = []
    ops = ["date", "views", "comments", "related", "ad"]
    rng.shuffle(ops)
    for op in ops:
        if len(changes) >= rng.randint(2, 3):
            break
        if op == "date":
            html2, n = shift_dates(html, rng)
            if n:
                html = html2
                changes.append("date")
        elif op == "views":
            v = rng.randint(120, 98000)
            html = insert_after_body(html, f'<div class="page-meta"><span class="views">{v:,} views</span> '
                                           f'<span class="updated">Updated {rng.randint(1, 59)} minutes ago</span></div>')
            changes.append("views")
        elif op == "comments":
            c = rng.randint(0, 480)
            html = insert_before_body_end(html, f'<div class="comment-count"><a href="#comments">{c} comments</a></div>')
            changes.append("comments")
        elif op == "related":
            doc = parse(html)
            if doc is None:
                continue
            lists = [ul for ul in doc.iter("ul", "ol") if len(ul) >= 3 and ul.xpath(".//a")
                     and (src.main_el is None or True)]
            lists = [ul for ul in lists if len(norm_space(ul.text_content())) < 3000]
            if not lists:
                continue
            for ul in rng.sample(lists, min(len(lists), 2)):
                items = list(ul)
                rng.shuffle(items)
                for it in items:
                    ul.remove(it)
                for it in items:
                    ul.append(it)
            html = serialize(doc)
            changes.append("related-order")
        elif op == "ad":
            slot = rng.randrange(1, 10**8)
            html = insert_after_body(html, f'<div class="ad-slot" id="div-gpt-ad-{slot}" data-slot="/{slot % 9999}/top">'
                                           f'<script>googletag.cmd.push(function(){{googletag.display("div-gpt-ad-{slot}");}});</script></div>')
            changes.append("ad-slot")
    if not changes:
        html = insert_after_body(html, f'<div class="page-meta"><span class="views">{rng.randint(50, 9000)} views</span></div>')
        changes.append("views")
    return html, "+".join(changes)


def minimal_page(title, paras, url, amp=False, site=""):
    body = "".join(f"<p>{htmlmod.escape(p)}</p>\n" for p in paras)
    if amp:
        return (f'<!doctype html>\n<html amp lang="en"><head><meta charset="utf-8"><title>{htmlmod.escape(title)}</title>'
                f'<link rel="canonical" href="{htmlmod.escape(url)}"><meta name="viewport" content="width=device-width">'
                f'<script async src="https://cdn.ampproject.org/v0.js"></script><style amp-custom>body{{font-family:sans-serif}}</style></head>'
                f'<body><header class="amp-header"><a href="/">{htmlmod.escape(site)}</a></header>'
                f'<article><h1>{htmlmod.escape(title)}</h1>\n{body}</article></body></html>')
    return (f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{htmlmod.escape(title)}</title>'
            f'<meta name="robots" content="noindex"><link rel="canonical" href="{htmlmod.escape(url)}"></head>'
            f'<body onload="window.print()"><h1>{htmlmod.escape(title)}</h1>\n{body}</body></html>')


def fill_template(tpl, title, paras, note=None):
    """Puts paragraphs into the main element of a real page template, keeping the rest of the page."""
    doc = parse(tpl.html)
    el = main_element(doc)
    if el is None:
        return None
    for c in list(el):
        el.remove(c)
    el.text = None
    if note:
        p = etree.SubElement(el, "p")
        p.set("class", "editors-note")
        em = etree.SubElement(p, "em")
        em.text = note
    for t in paras:
        p = etree.SubElement(el, "p")
        p.text = t
    h1s = doc.xpath("//h1")
    if h1s:
        h = h1s[0]
        for c in list(h):
            h.remove(c)
        h.text = title
    for t in doc.xpath("//title"):
        t.text = title
    for m in doc.xpath("//meta[@property='og:title' or @name='twitter:title']"):
        m.set("content", title)
    for m in doc.xpath("//meta[@name='description' or @property='og:description' or @name='twitter:description']"):
        m.set("content", " ".join(paras[0].split()[:30]) if paras else "")
    return serialize(doc)


EDITOR_NOTES = [
    "This story has been updated with additional information.",
    "Editor's note: This article was first published by a partner outlet and is republished with permission.",
    "This article is republished from our news partners.",
    "Correction: An earlier version of this story misstated a date.",
    "This story was produced in partnership with a wire service.",
]


def edit_headline(title, rng):
    prefixes = ["UPDATE: ", "Report: ", "Watch: ", "Analysis: ", "Explainer: "]
    if rng.random() < 0.5:
        return rng.choice(prefixes) + title
    w = title.split()
    if len(w) > 6:
        return " ".join(w[:max(4, len(w) - 3)])
    return title + " - latest"


# ----------------------------------------------------------------------------- products

COLOURS = ["black", "white", "red", "blue", "green", "grey", "gray", "navy", "beige", "brown", "pink",
           "yellow", "silver", "gold", "orange", "purple", "cream", "khaki", "schwarz", "weiss", "weiß",
           "blau", "rot", "grün", "noir", "blanc", "bleu", "rouge", "nero", "bianco", "negro", "blanco"]
PRICE = re.compile(r"(?<![\w.,])(\d{1,4})([.,])(\d{2})(?![\d])")


DESC_CLASS = re.compile(r"(description|product-desc|product-detail|productdetail|product-info|features|"
                        r"feature-bullets|specification|pdp-|product__info|product-summary|details)", re.I)


def product_text(doc):
    """The text that tells one product from another: name, descriptions, feature and detail blocks."""
    parts = []
    for xp in ("//h1", "//meta[@name='description']/@content", "//meta[@property='og:description']/@content",
               "//meta[@property='og:title']/@content"):
        for r in doc.xpath(xp)[:1]:
            parts.append(norm_space(r if isinstance(r, str) else r.text_content()))
    for sc in doc.xpath("//script[@type='application/ld+json']"):
        for m in re.finditer(r'"(?:name|description)"\s*:\s*"((?:[^"\\]|\\.){10,2000})"', sc.text or ""):
            parts.append(norm_space(m.group(1)))
    seen = set()
    for el in doc.iter():
        if not isinstance(el.tag, str) or el.tag in SKIP_ANCESTORS:
            continue
        key = (el.get("class") or "") + " " + (el.get("id") or "")
        if DESC_CLASS.search(key) and not skipped(el):
            if any(a in seen for a in el.iterancestors()):
                continue
            t = norm_space(el.text_content())
            if 20 <= len(t) <= 5000:
                seen.add(el)
                parts.append(t)
    out, dup = [], set()
    for p in parts:
        if p and p not in dup:
            dup.add(p)
            out.append(p)
    return "\n".join(out)


def product_variant(src, rng, i):
    html = src.html
    changes = []
    sku = (src.product.get("sku") or [None])[0] if hasattr(src, "product") else None
    if sku and len(sku) >= 4 and sku in html:
        tail = "".join(rng.choice("0123456789ABCDEFGHJKLMNPQRSTUVWXYZ") for _ in range(min(3, len(sku))))
        new = sku[:-len(tail)] + tail
        html = html.replace(sku, new)
        changes.append("sku")
    low = html.lower()
    present = [c for c in COLOURS if re.search(r"\b" + re.escape(c) + r"\b", low)]
    if present:
        c = rng.choice(present)
        repl = rng.choice([x for x in COLOURS if x != c and x not in present] or ["olive"])

        def col(m):
            w = m.group(0)
            return repl.capitalize() if w[0].isupper() else repl
        html = re.sub(r"\b" + re.escape(c) + r"\b", col, html, flags=re.I)
        changes.append(f"colour:{c}->{repl}")
    prices = PRICE.findall(html)
    if prices:
        factor = rng.choice([0.8, 0.9, 1.1, 1.15, 1.25])
        seen = {}

        def pr(m):
            key = m.group(0)
            if key not in seen:
                v = int(m.group(1)) * factor
                seen[key] = f"{int(v)}{m.group(2)}{m.group(3)}"
            return seen[key]
        html = PRICE.sub(pr, html)
        changes.append("price")
    size = rng.choice(["S", "M", "L", "XL", "38", "40", "42", "44"])
    html = insert_after_body(html, f'<div class="variant-selected" data-size="{size}">Selected size: {size}</div>')
    changes.append(f"size:{size}")
    if not changes:
        return None, None
    return html, "+".join(changes)


# ----------------------------------------------------------------------------- forums

FORUM_TEMPLATES = {
    # software: (repo, topic page, index page, post body xpath, post container xpath (relative), title xpaths, index title xpath)
    "phpbb2": ("pythontech/ptforum", "testdata/phpbb/viewtopic.php?start=0&t=805", "testdata/phpbb/viewforum.php?f=4",
               "//td[@class='postbody']", None, ["//td[@class='maintitle']/a"], "//a[@class='topictitle']",
               "Freeman Cruiser Fan Club", "viewtopic.php?t={t}", "viewforum.php?f={f}"),
    "phpbb3": ("pythontech/ptforum", "testdata/phpbb3/viewtopic.php?t=28017", "testdata/phpbb3/viewforum.php?f=35",
               "//div[@class='content']", "ancestor::div[contains(concat(' ', @class, ' '), ' post ')][1]",
               ["//h2"], "//a[@class='topictitle']", "Raspberry Pi", "viewtopic.php?f={f}&t={t}", "viewforum.php?f={f}"),
    "smf2": ("pythontech/ptforum", "testdata/smf2/index.php?topic=38573.0", "testdata/smf2/index.php?board=9.0",
             "//div[@class='inner']", "ancestor::div[contains(@class, 'windowbg')][1]",
             ["//h5/a", "//div[@id='forumposts']//h3"], "//span[starts-with(@id,'msg_')]/a", "SME Server",
             "index.php?topic={t}.0", "index.php?board={f}.0"),
}

FORUM_NAMES = [
    "Riverside Anglers", "Vintage Camera Exchange", "Allotment Growers", "Retro Console Club", "Canal Boat Owners",
    "Trail Runners Network", "Home Brewers Guild", "Model Railway Workshop", "Amateur Astronomy Circle",
    "Classic Motorbike Register", "Beekeepers Corner", "Woodturning Forum", "Aquarium Keepers", "Folk Fiddle Society",
    "Birdwatchers Log", "Linux Desktop Users", "Sourdough Bakers", "Chess Problemists", "Cycling Tourists",
    "Sea Kayak Club", "Hillwalkers Board", "Ham Radio Operators", "Knitting Circle", "Drone Pilots Hangar",
]


def forum_host(name, software):
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return f"{slug}-{software}.example"


def sa_posts(snaps):
    """Real forum posts (Something Awful thread pages), thread by thread."""
    threads = []
    files = [("imnotjames/pyawful", "tests/parse/fixtures/showthread.html")]
    s = snaps["Awful/Awful.app"]
    for p in s.paths("AwfulCore/Tests/AwfulCoreTests/Fixtures/", (".html",)):
        if os.path.basename(p).startswith("showthread"):
            files.append(("Awful/Awful.app", p))
    for repo, p in files:
        raw = snaps[repo].read(p)
        doc = parse(decode(raw))
        posts = []
        for td in doc.xpath("//td[contains(@class,'postbody')]"):
            for q in td.xpath(".//div[contains(@class,'bbc-block')]|.//p[contains(@class,'editedby')]"):
                q.getparent().remove(q)
            txt = [norm_space(t) for t in td.itertext()]
            txt = [t for t in txt if t]
            if len(words(" ".join(txt))) >= 8:
                posts.append(txt)
        threads.append((repo, p, hashlib.sha256(raw).hexdigest(), posts))
    return threads


def fill_forum_thread(tpl_html, software, title, posts, authors, site_old, site_new, host):
    repo, tp, ip, body_xp, cont_xp, title_xps, _, _, _, _ = FORUM_TEMPLATES[software]
    doc = parse(tpl_html)
    bodies = doc.xpath(body_xp)
    if cont_xp:
        for b in bodies[len(posts):]:
            c = b.xpath(cont_xp)
            if c and c[0].getparent() is not None:
                c[0].getparent().remove(c[0])
        bodies = bodies[:len(posts)]
    used = []
    for b, post in zip(bodies, posts):
        for c in list(b):
            b.remove(c)
        b.text = post[0]
        for line in post[1:]:
            br = etree.SubElement(b, "br")
            br.tail = line
        used.append(" ".join(post))
    for xp in title_xps:
        for e in doc.xpath(xp):
            for c in list(e):
                e.remove(c)
            e.text = title
    for t in doc.xpath("//title"):
        t.text = f"{site_new} • View topic - {title}"
    # poster names
    names = doc.xpath("//div[@class='author']//strong/a|//span[@class='name']/strong|//div[@class='poster']/h4/a"
                      "|//dl[contains(@class,'postprofile')]//dt/a[last()]")
    for i, n in enumerate(names):
        n.text = authors[i % len(authors)]
    html = serialize(doc)
    html = html.replace(site_old, site_new)
    return html, "\n".join(used)


def fill_forum_index(tpl_html, software, titles, site_old, site_new):
    xp = FORUM_TEMPLATES[software][6]
    doc = parse(tpl_html)
    links = doc.xpath(xp)
    for a, t in zip(links, itertools.cycle(titles)):
        for c in list(a):
            a.remove(c)
        a.text = t
    for t in doc.xpath("//title"):
        t.text = f"{site_new} • View forum"
    html = serialize(doc).replace(site_old, site_new)
    return html, "\n".join(titles[:len(links)])


# ----------------------------------------------------------------------------- assembly


def build(args):
    rng = random.Random(args.seed)
    snaps = {}
    overrides = dict(x.split("=", 1) for x in args.snapshot)
    v2 = args.edition == "v2"
    for repo, commit in (SOURCES_V2 if v2 else SOURCES).items():
        gitdir = overrides.get(repo) or os.path.join(args.mirrors, repo.replace("/", "+"), "repo")
        snaps[repo] = Snapshot(repo, gitdir, commit)
    manifest = []  # (repo, commit, path, sha, role)

    print("loading source pages", file=sys.stderr)
    all_srcs = load_sources_v2(snaps) if v2 else load_sources(snaps)
    srcs = all_srcs
    if v2:
        srcs, n_host = host_filter(srcs, args.exclude_corpus)
        print(f"{n_host} source pages dropped for a host in the exclusion corpora", file=sys.stderr)
    srcs, n_dev = dev_filter(srcs, args.exclude_corpus)
    srcs = dedup_sources(srcs)
    srcs = [s for s in srcs if s.doc is not None]
    for s in all_srcs:
        if s not in srcs and not s.roles:
            s.roles.append("excluded:unparsable")
    print(f"{len(all_srcs)} source pages, {n_dev} dropped for the exclusion corpus, {len(srcs)} kept",
          file=sys.stderr)

    pages = []

    def add(page):
        pages.append(page)
        return page

    def real_page(s, kind="page", cluster=None, tkey=None):
        return add(Page(s.url, s.html, f"{s.repo}:{s.path}", kind, cluster, s.text, tkey))

    articles = [s for s in srcs if s.origin == "article"]
    products = [s for s in srcs if s.origin == "product"]

    # CMS: real pages of different hosts running the same WordPress theme
    theme_hosts = defaultdict(set)
    for s in articles:
        if s.theme:
            theme_hosts[s.theme].add(reg_domain(s.host))
    cms_themes = {t for t, h in theme_hosts.items() if len(h) >= 2}
    cms_real = [s for s in articles if s.theme in cms_themes]
    host_count = Counter(reg_domain(s.host) for s in articles)

    good = [s for s in articles if s.nwords >= 200 and len(s.paras) >= 4 and s.theme not in cms_themes
            and not getattr(s, "overlaps", False)
            and s.main_el is not None and s.title]
    good.sort(key=lambda s: (s.repo, s.path))
    rng.shuffle(good)
    used_hosts = set()
    used = set()

    def take(n, pred=lambda s: True, distinct=True):
        out = []
        for s in good:
            if len(out) >= n:
                break
            if id(s) in used or not pred(s):
                continue
            if distinct and reg_domain(s.host) in used_hosts:
                continue
            out.append(s)
            used.add(id(s))
            used_hosts.add(reg_domain(s.host))
        return out

    # donors: texts of pages that are not themselves in the corpus (briefs, CMS fills, index titles)
    donors = take(args.donors, distinct=False)
    for s in donors:
        s.roles.append("text-donor")

    cluster_no = Counter()

    def new_cluster(kind):
        cluster_no[kind] += 1
        return f"{kind}:{cluster_no[kind]:03d}"

    # 1. aggregator: one article under several URLs of one host
    for s in take(args.aggregator):
        cl = new_cluster("aggregator")
        n = rng.choice([3, 3, 3, 4, 4, 5, 5, 6, 7, 8, 10, 12])
        real_page(s, "aggregator", cl)
        s.roles.append(cl)
        styles = ["utm", "id", "section", "mobile", "story", "trailing", "page", "session"]
        seen = {s.url}
        for i in range(n - 1):
            for _ in range(10):
                u = url_variant(s.url, rng, rng.choice(styles))
                if u not in seen:
                    break
            seen.add(u)
            html = s.html if rng.random() < 0.5 else set_url_bits(s.html, u)
            add(Page(u, html, f"{s.repo}:{s.path}", "aggregator", cl, s.text,
                     note="identical" if html == s.html else "url-bits"))

    # 2. near-identical: re-fetches with changed dates, counters, sidebar order, ad slots
    for s in take(args.near_identical):
        cl = new_cluster("near-identical")
        real_page(s, "near-identical", cl)
        s.roles.append(cl)
        for i in range(rng.choice([1, 1, 2, 2, 3])):
            html, what = refetch(s, rng, i)
            u = s.url if rng.random() < 0.5 else url_variant(s.url, rng, rng.choice(["page", "trailing"]))
            add(Page(u, html, f"{s.repo}:{s.path}", "near-identical", cl, s.text, note=what))

    # 3. wire: one story in other sites' real templates with outlet edits
    stories = take(args.wire)
    tpl_pool = [s for s in good if id(s) not in used]
    tpl_used = Counter()
    for s in stories:
        cl = new_cluster("wire")
        real_page(s, "wire", cl)
        s.roles.append(cl)
        k = rng.choice([1, 2, 2, 3])
        cands = [t for t in tpl_pool if reg_domain(t.host) != reg_domain(s.host) and tpl_used[id(t)] < 2]
        rng.shuffle(cands)
        hosts = {reg_domain(s.host)}
        for t in cands:
            if k == 0:
                break
            if reg_domain(t.host) in hosts:
                continue
            paras = list(s.paras)
            title = s.title
            edits = []
            r = rng.random()
            if r < 0.3:
                title = edit_headline(title, rng)
                edits.append("headline")
            elif r < 0.6 and len(paras) > 4:
                paras = paras[:-1]
                edits.append("dropped-last-paragraph")
            note = None
            if rng.random() < 0.3:
                note = rng.choice(EDITOR_NOTES)
                edits.append("editors-note")
            html = fill_template(t, title, paras, note)
            if html is None:
                continue
            hosts.add(reg_domain(t.host))
            tpl_used[id(t)] += 1
            t.roles.append(f"wire-template:{cl}")
            slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:60]
            u = f"https://{t.host}/{rng.choice(['news', 'world', 'wire', 'story', 'article'])}/{slug}"
            add(Page(u, html, f"{s.repo}:{s.path} in {t.repo}:{t.path}", "wire", cl,
                     "\n".join(([note] if note else []) + paras), tkey=None, note="+".join(edits) or "verbatim"))
            k -= 1

    # 4. mirror: an identical page on another host
    mirror_hosts = ["mirror.{d}", "archive-{d}", "www2.{d}", "cache.{d}"]
    for s in take(args.mirror):
        cl = new_cluster("mirror")
        real_page(s, "mirror", cl)
        s.roles.append(cl)
        for i in range(rng.choice([1, 1, 1, 2])):
            d = reg_domain(s.host).replace(".", "-")
            mh = rng.choice(["mirror.", "archive.", "cache.", "copy."]) + d + rng.choice([".net", ".org", ".info"])
            u = re.sub(r"^https?://[^/]+", "https://" + mh, s.url)
            html = s.html if rng.random() < 0.6 else s.html.replace("//" + s.host, "//" + mh)
            add(Page(u, html, f"{s.repo}:{s.path}", "mirror", cl, s.text, note="identical" if html == s.html else "links-rewritten"))

    # 5. print / AMP / URL parameter variants
    for s in take(args.print_):
        cl = new_cluster("print")
        real_page(s, "print", cl)
        s.roles.append(cl)
        vs = rng.sample(["print", "amp", "utm"], rng.choice([1, 2, 2, 3]))
        for v in vs:
            if v == "utm":
                u = url_variant(s.url, rng, rng.choice(["utm", "session"]))
                add(Page(u, s.html, f"{s.repo}:{s.path}", "print", cl, s.text, note="tracking-params"))
            else:
                u = url_variant(s.url, rng, v)
                html = minimal_page(s.title, s.paras, s.url, amp=(v == "amp"), site=s.host)
                add(Page(u, html, f"{s.repo}:{s.path}", "print", cl, "\n".join(s.paras), note=v))

    # 6. short items on one host sharing the template; some reposted under another URL
    short_tpls = take(args.short_hosts)
    brief_sources = [d for d in donors]
    bi = 0
    for t in short_tpls:
        t.roles.append("short-template")
        for j in range(args.briefs_per_host):
            if bi >= len(brief_sources):
                break
            d = brief_sources[bi]
            bi += 1
            text, paras = [], []
            for p in d.paras:
                if len(words(" ".join(text + [p]))) > 150:
                    break
                text.append(p)
            if len(words(" ".join(text))) < 20:
                # cut the first paragraph into a brief of at most 120 words
                w = d.paras[0].split()
                text = [" ".join(w[:120])]
            if len(words(" ".join(text))) < 20:
                continue
            d.roles.append(f"brief-on:{t.host}")
            title = d.title
            html = fill_template(t, title, text)
            if html is None:
                continue
            slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:50]
            u = f"https://{t.host}/briefs/{slug}"
            if rng.random() < 0.3:
                cl = new_cluster("short")
                add(Page(u, html, f"{d.repo}:{d.path} in {t.repo}:{t.path}", "short", cl, "\n".join(text)))
                u2 = url_variant(u, rng, rng.choice(["id", "section", "utm"]))
                add(Page(u2, set_url_bits(html, u2), f"{d.repo}:{d.path} in {t.repo}:{t.path}", "short", cl,
                         "\n".join(text), note="repost"))
            else:
                add(Page(u, html, f"{d.repo}:{d.path} in {t.repo}:{t.path}", "short", None, "\n".join(text)))

    # 7a. CMS, real: pages of different hosts with one WordPress theme
    for s in cms_real:
        real_page(s, "cms", None, tkey=s.theme)
        s.roles.append("cms-real")
        used.add(id(s))
    # 7b. CMS, built: one real WordPress page filled with other articles under other hosts
    cms_tpls = [s for s in cms_real if s.main_el is not None and s.nwords >= 150]
    cms_tpls.sort(key=lambda s: (s.theme, s.repo, s.path))
    by_theme = defaultdict(list)
    for s in cms_tpls:
        by_theme[s.theme].append(s)
    themes = sorted(by_theme, key=lambda t: (-len(by_theme[t]), t))[:args.cms_themes]
    di = bi
    for th in themes:
        tpl = by_theme[th][0]
        tpl.roles.append("cms-template")
        for j in range(args.cms_sites):
            if di >= len(donors):
                break
            d = donors[di]
            di += 1
            html = fill_template(tpl, d.title, d.paras)
            if html is None:
                continue
            site = rng.choice(FORUM_NAMES) + f" {j + 1}"
            host = re.sub(r"[^a-z0-9]+", "-", site.lower()).strip("-") + "-blog.example"
            html = html.replace(tpl.host, host)
            d.roles.append(f"cms-fill:{th}")
            slug = re.sub(r"[^a-z0-9]+", "-", d.title.lower()).strip("-")[:50]
            add(Page(f"https://{host}/{rng.randint(2012, 2023)}/{rng.randint(1, 12):02d}/{slug}/", html,
                     f"{d.repo}:{d.path} in {tpl.repo}:{tpl.path}", "cms", None, "\n".join(d.paras), tkey=th))

    # 8. forums: real software templates filled with real thread texts under several hosts
    threads = [] if v2 else sa_posts(snaps)
    # threads with the most posts give their posts to the built pages; the pages they come from stay
    # out of the corpus (their text would be in two places)
    threads.sort(key=lambda t: (-len(t[3]), t[0], t[1]))
    post_stream = [posts for _, _, _, posts in threads]
    authors_pool = ["pebble_dash", "Kestrel77", "northbound", "old_rigger", "marigold", "tinkerer", "Hobnail",
                    "quietcat", "sparrowhawk", "Dunmore", "vexillum", "ferrous", "lowtide", "Brackenridge",
                    "copperkettle", "Odd Job", "zeroday", "Wendover", "fieldnotes", "longshanks"]
    cursor = [0, 0]  # thread index, post index

    def next_posts(k):
        while cursor[0] < len(post_stream):
            posts = post_stream[cursor[0]]
            if cursor[1] + k <= len(posts):
                out = posts[cursor[1]:cursor[1] + k]
                cursor[1] += k
                return out
            cursor[0] += 1
            cursor[1] = 0
        return None

    headline_pool = [d.title for d in donors[di:]] + [s.title for s in good if id(s) not in used]
    hi = 0
    forum_names = list(FORUM_NAMES)
    rng.shuffle(forum_names)
    fn = 0
    for software in ([] if v2 else sorted(FORUM_TEMPLATES)):
        repo, tp, ip, *_rest = FORUM_TEMPLATES[software]
        site_old = FORUM_TEMPLATES[software][7]
        s = snaps[repo]
        traw, iraw = s.read(tp), s.read(ip)
        manifest.append((repo, SOURCES[repo], tp, hashlib.sha256(traw).hexdigest(), f"forum-template:{software}"))
        manifest.append((repo, SOURCES[repo], ip, hashlib.sha256(iraw).hexdigest(), f"forum-template:{software}"))
        thtml, ihtml = decode(traw), decode(iraw)
        slots = len(parse(thtml).xpath(FORUM_TEMPLATES[software][3]))
        for h in range(args.forum_hosts):
            name = forum_names[fn % len(forum_names)]
            fn += 1
            host = forum_host(name, software)
            host_titles = []
            for tn in range(args.forum_threads):
                k = min(slots, rng.randint(2, 5))
                posts = next_posts(k)
                if posts is None:
                    break
                title = " ".join(" ".join(posts[0]).split()[:rng.randint(5, 9)]).rstrip(".,:;!?")
                authors = rng.sample(authors_pool, 6)
                html, text = fill_forum_thread(thtml, software, title, posts, authors, site_old, name, host)
                tid = rng.randint(1000, 90000)
                u = f"https://{host}/" + FORUM_TEMPLATES[software][8].format(t=tid, f=rng.randint(2, 40))
                cl = None
                if rng.random() < args.forum_sid_share:
                    cl = new_cluster("forum")
                add(Page(u, html, f"{repo}:{tp} filled", "forum", cl, text, tkey=f"forum:{software}"))
                if cl:
                    sid = hashlib.md5(u.encode()).hexdigest()
                    u2 = u + ("&" if "?" in u else "?") + "sid=" + sid
                    add(Page(u2, html.replace("sid=", "sid=" + sid[:6]), f"{repo}:{tp} filled", "forum", cl, text,
                             tkey=f"forum:{software}", note="session-id-url"))
                host_titles.append(title)
            titles = host_titles + headline_pool[hi:hi + 30]
            hi += 30
            html, text = fill_forum_index(ihtml, software, titles, site_old, name)
            u = f"https://{host}/" + FORUM_TEMPLATES[software][9].format(f=rng.randint(2, 40))
            add(Page(u, html, f"{repo}:{ip} filled", "forum", None, text, tkey=f"forum:{software}-index"))
    consumed = cursor[0] + (1 if cursor[1] else 0)
    for ti, (repo, p, sha, posts) in enumerate(threads):
        manifest.append((repo, SOURCES[repo], p, sha, "forum-posts" if ti < consumed else "forum-real"))
    # real forum pages of one host (different threads and boards); same board saved twice = a re-fetch
    forum_real = [(repo, p) for ti, (repo, p, _, _) in enumerate(threads) if ti >= consumed]
    if not v2:
        forum_real.append(("imnotjames/pyawful", "tests/parse/fixtures/forumdisplay.html"))
        fa = snaps["Awful/Awful.app"]
        for p in fa.paths("AwfulCore/Tests/AwfulCoreTests/Fixtures/", (".html",)):
            if os.path.basename(p).startswith("forumdisplay"):
                forum_real.append(("Awful/Awful.app", p))
    real_forum_pages = []
    for repo, p in forum_real:
        raw = snaps[repo].read(p)
        html = decode(raw)
        doc = parse(html)
        body = doc.xpath("//td[contains(@class,'postbody')]") or doc.xpath("//a[contains(@class,'thread_title')]")
        text = "\n".join(norm_space(b.text_content()) for b in body)
        m = re.search(r"threadid=(\d+)", html) if "showthread" in p else re.search(r"forumid=(\d+)", html)
        num = m.group(1) if m else hashlib.sha1(p.encode()).hexdigest()[:6]
        u = (f"https://forums.somethingawful.com/showthread.php?threadid={num}&pagenumber={rng.randint(1, 40)}"
             if "showthread" in p else f"https://forums.somethingawful.com/forumdisplay.php?forumid={num}&page={rng.randint(1, 9)}")
        real_forum_pages.append(add(Page(u, html, f"{repo}:{p}", "forum", None, text, tkey="forum:somethingawful")))
        if "showthread" not in p:
            manifest.append((repo, SOURCES[repo], p, hashlib.sha256(raw).hexdigest(), "forum-real"))
    # the same board index saved twice (texts near-identical) is one page re-fetched: a positive
    for a, b in itertools.combinations(real_forum_pages, 2):
        if jaccard(shingles(a.main), shingles(b.main)) >= 0.8:
            cl = a.cluster or b.cluster or new_cluster("forum")
            a.cluster = b.cluster = cl
            if a.note == "":
                a.note = b.note = "board-index-refetch"
    # the template pages themselves, at their own hosts (phpBB 2 t=805 is saved under two URLs)
    real_urls = {
        "testdata/phpbb/viewtopic.php?start=0&t=805": ["https://freemancruiser.forumer.com/viewtopic.php?start=0&t=805",
                                                        "https://freemancruiser.forumer.com/viewtopic.php?t=805"],
        "testdata/phpbb/viewforum.php?f=4": ["https://freemancruiser.forumer.com/viewforum.php?f=4"],
        "testdata/phpbb3/viewtopic.php?t=28017": ["https://www.raspberrypi.org/phpBB3/viewtopic.php?t=28017"],
        "testdata/phpbb3/viewforum.php?f=35": ["https://www.raspberrypi.org/phpBB3/viewforum.php?f=35"],
        "testdata/smf2/index.php?topic=38573.0": ["http://forums.contribs.org/index.php?topic=38573.0"],
        "testdata/smf2/index.php?board=9.0": ["http://forums.contribs.org/index.php?board=9.0"],
    }
    for software in ([] if v2 else sorted(FORUM_TEMPLATES)):
        repo = FORUM_TEMPLATES[software][0]
        for p in FORUM_TEMPLATES[software][1:3]:
            html = decode(snaps[repo].read(p))
            doc = parse(html)
            xp = FORUM_TEMPLATES[software][3] if "topic" in p else FORUM_TEMPLATES[software][6]
            text = "\n".join(norm_space(e.text_content()) for e in doc.xpath(xp))
            urls = real_urls[p]
            cl = new_cluster("forum") if len(urls) > 1 else None
            tk = f"forum:{software}" + ("" if "topic" in p else "-index")
            for u in urls:
                add(Page(u, html, f"{repo}:{p}", "forum", cl, text, tkey=tk, note="real" if not cl else "real-url-variant"))

    # 9. products: real product pages of one shop; variants of one product are positives
    shop = defaultdict(list)
    for s in sorted(products, key=lambda s: (s.host, s.path)):
        shop[s.host].append(s)
    pv = [s for s in products if len(shop[s.host]) >= 2]
    pv.sort(key=lambda s: (s.host, s.path))
    rng.shuffle(pv)
    base_set = set(id(s) for s in pv[:args.product])
    for s in sorted(products, key=lambda s: (s.host, s.path)):
        if id(s) in base_set:
            cl = new_cluster("product")
            made = []
            for i in range(rng.choice([1, 2, 2, 3])):
                html, what = product_variant(s, rng, i)
                if html is None or html == s.html:
                    continue
                sep = "&" if "?" in s.url else "?"
                u = f"{s.url}{sep}variant={rng.randint(100000, 999999)}"
                vd = parse(html)
                made.append(Page(u, html, f"{s.repo}:{s.path}", "product", cl,
                                 product_text(vd) if vd is not None else "", note=what))
            if made:
                real_page(s, "product", cl)
                s.roles.append(cl)
                for m in made:
                    add(m)
                continue
        real_page(s, "product")
        s.roles.append("product")

    # 10. the other real pages: distractors and same-site different articles
    for s in articles:
        if id(s) in used:
            continue
        real_page(s, "page")
        s.roles.append("page")
    # the pages whose templates carry the short items are in the corpus too
    for s in short_tpls:
        real_page(s, "page")
        s.roles.append("page")

    # ids, main texts for pages built from whole HTML
    for i, p in enumerate(pages):
        p.pid = "wd-" + hashlib.sha1(f"{args.seed}:{i}:{p.url}:{p.source}".encode()).hexdigest()[:16]
        if p.main is None:
            doc = parse(p.html)
            el = main_element(doc) if doc is not None else None
            p.main = "\n".join(paragraphs_of(el)) if el is not None else ""
        p.lang = lang_of(p.main)

    # stream order
    order = list(range(len(pages)))
    rng.shuffle(order)
    pages = [pages[i] for i in order]

    # manifest of the source pages
    for s in all_srcs:
        manifest.append((s.repo, ALL_SOURCES[s.repo], s.path, s.sha, ";".join(s.roles) or "unused"))
    return pages, manifest, n_dev


def pairs_and_checks(pages):
    sh = [shingles(p.main or "") for p in pages]
    hosts = [host_of(p.url) for p in pages]
    doms = [reg_domain(h) for h in hosts]
    pos = []
    by_cluster = defaultdict(list)
    for i, p in enumerate(pages):
        if p.cluster:
            by_cluster[p.cluster].append(i)
    for cl, ix in sorted(by_cluster.items()):
        for a, b in itertools.combinations(ix, 2):
            pos.append((a, b, pages[a].kind, jaccard(sh[a], sh[b]), containment(sh[a], sh[b]), cl,
                        "yes" if hosts[a] == hosts[b] else "no"))
    # negatives sharing a host (registered domain) or a template key
    groups = defaultdict(list)
    for i, p in enumerate(pages):
        groups["host:" + doms[i]].append(i)
        if p.tkey:
            groups["tpl:" + p.tkey.split("-index")[0]].append(i)
    same = {}
    for g, ix in groups.items():
        if len(ix) < 2:
            continue
        rel = "same_host" if g.startswith("host:") else "same_software"
        for a, b in itertools.combinations(sorted(ix), 2):
            if pages[a].cluster and pages[a].cluster == pages[b].cluster:
                continue
            key = (min(a, b), max(a, b))
            if key not in same or rel == "same_host":
                same[key] = (rel, g.split(":", 1)[1])
    # all negative pairs whose main texts overlap: candidates through sampled shingles
    index = defaultdict(list)
    for i, s in enumerate(sh):
        for h in s:
            if h % 8 == 0:
                index[h].append(i)
    cand = set()
    for h, ix in index.items():
        if len(ix) > 200:
            continue
        for a, b in itertools.combinations(ix, 2):
            cand.add((a, b))
    cand |= set(same)
    gray = []
    for a, b in sorted(cand):
        if pages[a].cluster and pages[a].cluster == pages[b].cluster:
            continue
        j = jaccard(sh[a], sh[b])
        if j >= GRAY_THRESHOLD:
            rel = same.get((a, b), ("other", ""))[0]
            gray.append((a, b, j, containment(sh[a], sh[b]), rel))
    gray_set = {(a, b) for a, b, *_ in gray}
    same_rows = [(a, b, rel, key, jaccard(sh[a], sh[b])) for (a, b), (rel, key) in sorted(same.items())
                 if (a, b) not in gray_set]
    return pos, same_rows, gray


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mirrors", required=True, help="directory of snapshots laid out as <owner>+<name>/repo")
    ap.add_argument("--snapshot", action="append", default=[], help="owner/name=GITDIR")
    ap.add_argument("--out", required=True)
    ap.add_argument("--exclude-corpus", action="append", default=None,
                    help="a corpus JSONL.gz whose pages must not be reused (the dev corpus); repeatable")
    ap.add_argument("--edition", choices=["v1", "v2"], default="v1",
                    help="v2: the SOURCES_V2 pages, hosts of the excluded corpora dropped, no forums")
    ap.add_argument("--seed", type=int, default=20240607)
    ap.add_argument("--donors", type=int, default=90)
    ap.add_argument("--aggregator", type=int, default=22)
    ap.add_argument("--near-identical", type=int, default=45)
    ap.add_argument("--wire", type=int, default=40)
    ap.add_argument("--mirror", type=int, default=35)
    ap.add_argument("--print", dest="print_", type=int, default=35)
    ap.add_argument("--short-hosts", type=int, default=4)
    ap.add_argument("--briefs-per-host", type=int, default=14)
    ap.add_argument("--cms-themes", type=int, default=3)
    ap.add_argument("--cms-sites", type=int, default=6)
    ap.add_argument("--forum-hosts", type=int, default=7)
    ap.add_argument("--forum-threads", type=int, default=2)
    ap.add_argument("--forum-sid-share", type=float, default=0.15)
    ap.add_argument("--product", type=int, default=30)
    args = ap.parse_args()

    pages, manifest, n_dev = build(args)
    pos, same, gray = pairs_and_checks(pages)
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, "webdup-" + args.edition)
    with open(stem + ".jsonl.gz", "wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
            for p in pages:
                rec = {"id": p.pid, "url": p.url, "html": p.html, "cluster": p.cluster, "kind": p.kind,
                       "source": p.source, "lang": p.lang}
                gz.write((json.dumps(rec, ensure_ascii=False) + "\n").encode("utf-8"))
    with open(stem + "-positive_pairs.tsv", "w") as f:
        f.write("id_a\tid_b\tkind\ttext_overlap\tcontainment\tcluster\tsame_host\tvariant_b\n")
        for a, b, kind, j, c, cl, sh in pos:
            f.write(f"{pages[a].pid}\t{pages[b].pid}\t{kind}\t{j:.4f}\t{c:.4f}\t{cl}\t{sh}\t{pages[b].note or pages[a].note}\n")
    with open(stem + "-same_template_pairs.tsv", "w") as f:
        f.write("id_a\tid_b\trelation\tsite_key\tkind_a\tkind_b\ttext_overlap\n")
        for a, b, rel, key, j in same:
            f.write(f"{pages[a].pid}\t{pages[b].pid}\t{rel}\t{key}\t{pages[a].kind}\t{pages[b].kind}\t{j:.4f}\n")
    with open(stem + "-gray_pairs.tsv", "w") as f:
        f.write("id_a\tid_b\tjaccard5_main\tcontainment5_main\trelation\tkind_a\tkind_b\tsource_a\tsource_b\n")
        for a, b, j, c, rel in gray:
            f.write(f"{pages[a].pid}\t{pages[b].pid}\t{j:.4f}\t{c:.4f}\t{rel}\t{pages[a].kind}\t{pages[b].kind}"
                    f"\t{pages[a].source}\t{pages[b].source}\n")
    with open(stem + "-manifest.tsv", "w") as f:
        f.write("repo\tcommit\tpath\tsha256\trole\n")
        seen = set()
        for row in sorted(manifest):
            if row in seen:
                continue
            seen.add(row)
            f.write("\t".join(row) + "\n")
    kinds = Counter(p.kind for p in pages)
    stats = {
        "pages": len(pages),
        "pages_by_kind": dict(sorted(kinds.items())),
        "clusters_by_kind": dict(sorted(Counter(p.kind for p in pages if p.cluster and True).items())),
        "positive_pairs": len(pos),
        "positive_pairs_by_kind": dict(sorted(Counter(k for _, _, k, *_ in pos).items())),
        "positive_overlap_min_by_kind": {k: round(min(j for _, _, kk, j, *_ in pos if kk == k), 4)
                                         for k in sorted({k for _, _, k, *_ in pos})},
        "same_template_pairs": len(same),
        "same_template_pairs_by_kind": dict(sorted(Counter(
            "+".join(sorted({pages[a].kind, pages[b].kind})) for a, b, *_ in same).items())),
        "gray_pairs": len(gray),
        "languages": dict(Counter(p.lang for p in pages).most_common()),
        "excluded_for_dev_overlap": n_dev,
        "seed": args.seed,
    }
    with open(stem + "-stats.json", "w") as f:
        json.dump(stats, f, indent=1, ensure_ascii=False)
    print(json.dumps(stats, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
