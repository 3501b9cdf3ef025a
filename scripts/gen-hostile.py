#!/usr/bin/env python3
"""Writes a corpus of hostile and broken page JSONL for `neardup dedup` / `neardup run`.

Every record is made here (seeded, so the same arguments give the same bytes): broken JSON,
JSON of the wrong shape, bad URLs and times, bytes that are not UTF-8, NUL bytes, a 50 MB
page, 10,000-deep nesting, 1 million attributes on one tag, unterminated comments, scripts
and styles, pages of only markup, only stopwords or one very long word, the same sentence
100,000 times, right-to-left and CJK text, every named HTML entity (Python's
html.entities.html5) and numeric references to invalid code points, mixed with ordinary
valid pages. The lines are shuffled so the stream is mixed; the last line has no newline.

Each record that is a JSON object with a usable `id` field has an id naming its category
(`<category>-<n>`), so tagged output can be traced back. Records that cannot carry an id
(not JSON, not an object, the id is the thing under test) are traced by line number through
the sidecar.

The sidecar `<out>.expect.json` holds the number of lines, the per-category counts, what
each category should yield (`tagged`, `blank`, `dead:<reason>`, `dead` for any reason, or
`any`) and the category of every line, in order.

Usage: scripts/gen-hostile.py --out FILE [--count N] [--seed S] [--split-dir DIR] [--skip A,B]
  --count      number of lines (default 1500, of which 1,240 hostile and 260 ordinary pages;
               at least the fixed heavy records + 1 per category)
  --split-dir  also write one JSONL file per category (lines in corpus order) into DIR
  --skip       leave these categories out (the other categories share their lines)
"""
import argparse
import datetime
import html.entities
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STOPWORDS = ROOT / "crates" / "neardup-core" / "src" / "text" / "stopwords" / "english.txt"
BIG_PAGE_BYTES = 50_000_000
BASE_TIME = 1_795_161_600  # 2026-11-20T00:00:00Z

# ------------------------------------------------------------------------------------------
# Text made up for this corpus
# ------------------------------------------------------------------------------------------

SUBJECTS = [
    "the council", "the mayor", "the harbor authority", "a spokesperson for the ferry company",
    "the school board", "the regional water office", "the planning committee", "the union",
    "the farmers market association", "the museum director", "the fire chief", "the rail operator",
    "a group of residents", "the library trust", "the port engineer", "the county treasurer",
    "the hospital board", "the transit agency", "the parks department", "the bridge inspector",
]
VERBS = [
    "approved", "rejected", "delayed", "announced", "criticised", "funded", "inspected", "opened",
    "closed", "reviewed", "proposed", "defended", "questioned", "postponed", "extended", "repaired",
    "cancelled", "welcomed", "measured", "published", "doubled", "reduced", "replaced", "moved",
]
ADJECTIVES = [
    "new", "old", "northern", "southern", "temporary", "costly", "wooden", "flooded", "quiet",
    "crowded", "narrow", "historic", "rebuilt", "larger", "smaller", "seasonal", "public",
    "private", "damaged", "electric", "rural", "coastal", "upper", "lower",
]
NOUNS = [
    "barrier", "bridge", "library", "ferry", "timetable", "budget", "market", "school", "pier",
    "station", "road", "tunnel", "reservoir", "harbor", "clinic", "playground", "archive",
    "warehouse", "lighthouse", "orchard", "canal", "depot", "footpath", "garden", "roof",
    "pipeline", "boardwalk", "shelter", "courthouse", "granary",
]
PLACES = [
    "Alder River", "North Pier", "Kestrel Hill", "Millbrook", "the old quarter", "Saltmarsh Lane",
    "Harbor Street", "the east bank", "Juniper Park", "Tollgate Road", "Ravensfield", "Copper Bay",
]
TIMES = [
    "on Monday", "last week", "in the spring", "after a long debate", "before the winter",
    "this month", "at the end of the year", "within two weeks", "by the autumn", "in March",
]
TEMPLATES = [
    "{S} {V} the {A} {N} near {P} {T}.",
    "{S} said that the {A} {N} was {V} {T}.",
    "The {N} at {P} has been {V} and will be {V2} {T}.",
    "According to {S2}, the {A} {N} is {V} because the {N2} was {A2}.",
    "{S} has {V} a plan for the {N} that the {N2} at {P} would need.",
    "This {N} had been {V} twice, {S2} said {T}.",
    "The {A} {N} will be {V} {T}, and the {N2} near {P} were {V2} as well.",
    "An inspection of the {N} found that the {A} {N2} is {V2}.",
    "Residents of {P} said the {N} was {A} and that the {N2} is {A2}.",
    "The cost of the {A} {N} would be {V} if the {N2} is {V2} {T}.",
]


def sentence(rng):
    t = rng.choice(TEMPLATES)
    s = t.format(
        S=rng.choice(SUBJECTS).capitalize(), S2=rng.choice(SUBJECTS), V=rng.choice(VERBS),
        V2=rng.choice(VERBS), A=rng.choice(ADJECTIVES), A2=rng.choice(ADJECTIVES),
        N=rng.choice(NOUNS), N2=rng.choice(NOUNS), P=rng.choice(PLACES), T=rng.choice(TIMES),
    )
    return s[0].upper() + s[1:]


def paragraph(rng, lo=3, hi=6):
    return " ".join(sentence(rng) for _ in range(rng.randint(lo, hi)))


def story(rng, paras=None):
    return {
        "headline": sentence(rng).rstrip("."),
        "paras": [paragraph(rng) for _ in range(paras or rng.randint(3, 7))],
    }


NAV = ["Home", "News", "Local", "Business", "Sport", "Weather", "Opinion", "Contact"]


def page(story_, template=0, extra_head="", body_prefix="", body_suffix=""):
    """An ordinary page around a story, in one of three site templates."""
    h, ps = story_["headline"], story_["paras"]
    nav = "".join(f'<li><a href="/{n.lower()}">{n}</a></li>' for n in NAV)
    if template == 0:
        body = "".join(f"<p>{p}</p>\n" for p in ps)
        return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{h}</title>"
                f"{extra_head}<style>body {{ margin: 0 }}</style></head><body>{body_prefix}"
                f"<nav class=\"site-nav\"><ul>{nav}</ul></nav><article class=\"story\"><h1>{h}</h1>\n"
                f"{body}</article><footer class=\"footer\"><p>Copyright the Harbor Ledger</p>"
                f"</footer>{body_suffix}</body></html>")
    if template == 1:
        body = "".join(f'<div class="para">{p}</div>\n' for p in ps)
        return (f"<html><head><title>{h} | Copper Bay Courier</title>{extra_head}"
                f"<script>window.dataLayer = [];</script></head><body>{body_prefix}"
                f"<header><ul class=\"menu\">{nav}</ul></header><main><h2>{h}</h2>{body}</main>"
                f"<aside class=\"sidebar\"><h3>Most read</h3><ul>{nav}</ul></aside>{body_suffix}"
                f"</body></html>")
    body = "<br>\n".join(ps)
    return (f"<html><body>{body_prefix}<table><tr><td>{' | '.join(NAV)}</td></tr><tr><td>"
            f"<b>{h}</b><br>{body}</td></tr></table>{body_suffix}</body></html>")


def fetched(i):
    d = datetime.datetime.fromtimestamp(BASE_TIME + i * 7, datetime.timezone.utc)
    return d.strftime("%Y-%m-%dT%H:%M:%SZ")


def url(cat, i):
    return f"https://{cat.replace('_', '-')}.hostile.test/page/{i}"


def rec(cat, i, html_, **extra):
    r = {"id": f"{cat}-{i:05d}", "url": url(cat, i), "html": html_}
    r.update(extra)
    return r


def enc(obj, rng=None, ascii_=None):
    """One JSON line; ASCII-escaped for about a third of the records."""
    if ascii_ is None:
        ascii_ = rng.random() < 0.33 if rng else False
    return json.dumps(obj, ensure_ascii=ascii_).encode("utf-8")


def valid_line(rng, cat, i, html_=None):
    r = rec(cat, i, html_ if html_ is not None else page(story(rng), rng.randrange(3)))
    if rng.random() < 0.5:
        r["fetched_at"] = fetched(i)
    return enc(r, rng)


# ------------------------------------------------------------------------------------------
# Categories. Each generator takes (rng, n, cat) and returns n lines (bytes, no newline).
# ------------------------------------------------------------------------------------------

def gen_valid(rng, n, cat):
    """Ordinary pages, with exact and near copies so all three decisions occur."""
    out, stories = [], []
    for i in range(n):
        r = rng.random()
        if stories and r < 0.15:  # the same story in another template: a near-duplicate
            s = rng.choice(stories)
            html_ = page(s, rng.randrange(3))
        elif stories and r < 0.25:  # an edited copy: one paragraph dropped, one added
            s = rng.choice(stories)
            ps = list(s["paras"])
            if len(ps) > 2:
                ps.pop(rng.randrange(len(ps)))
            ps.append(paragraph(rng, 1, 2))
            html_ = page({"headline": s["headline"], "paras": ps}, rng.randrange(3))
        elif r < 0.30:  # a short page: too few signatures
            html_ = f"<html><body><p>{rng.choice(SUBJECTS)} {rng.choice(VERBS)}.</p></body></html>"
        else:
            s = story(rng)
            stories.append(s)
            html_ = page(s, rng.randrange(3))
        r = rec(cat, i, html_, fetched_at=fetched(i))
        if rng.random() < 0.3:
            r["headers"] = {"content-type": "text/html; charset=utf-8", "x-crawl": str(i)}
        out.append(enc(r, rng))
    return out


def gen_invalid_json(rng, n, cat):
    good = lambda i: enc(rec(cat, i, page(story(rng, 2))))  # noqa: E731
    garbage = lambda: "x" + "".join(rng.choice("abcdefghij klmnop:;,.!?()<>/=") for _ in range(rng.randint(10, 200)))  # noqa: E731
    variants = [
        lambda i: b"this line is not JSON at all " + str(i).encode(),
        lambda i: f"{{url: 'https://a.test/{i}', html: '<p>x</p>'}}".encode(),
        lambda i: f"{{'url': 'https://a.test/{i}', 'html': '<p>x</p>'}}".encode(),
        lambda i: f'{{"url": "https://a.test/{i}", "html": "<p>x</p>",}}'.encode(),
        lambda i: good(i) + good(i),
        lambda i: good(i) + b" garbage after the object",
        lambda i: good(i) + b"}}",
        lambda i: [b"NaN", b"Infinity", b"-Infinity", b"undefined", b"None", b"nil"][i % 6],
        lambda i: f"<html><body><p>raw html line {i}</p></body></html>".encode(),
        lambda i: f'{{"url": "https://a.test/{i}", "html": "a\tb"}}'.encode(),  # raw tab in a string
        lambda i: f'{{"url": "https://a.test/{i}", "html": "a\x01b\x1fc"}}'.encode(),
        lambda i: f'{{"url": "https://a.test/{i}", "html": "\\x41\\q"}}'.encode(),  # bad escapes
        lambda i: f'{{"url": "https://a.test/{i}" "html": "x"}}'.encode(),  # missing comma
        lambda i: f'{{"url": "https://a.test/{i}", "html": "x", "n": 0{i}}}'.encode(),  # leading zero
        lambda i: f'{{"url": "https://a.test/{i}", /* a comment */ "html": "x"}}'.encode(),
        lambda i: b"\x1b[31m" + good(i) + b"\x1b[0m",  # terminal colours
        lambda i: b")]}'," + good(i),
        lambda i: "\u201curl\u201d: \u201chttps://a.test/\u201d".encode(),  # typographic quotes
        lambda i: f'<?xml version="1.0"?><page url="https://a.test/{i}"/>'.encode(),
        lambda i: good(i) + b"\r" + good(i),  # a CR in the middle of the line
        lambda i: b"\x0b" + good(i),  # vertical tab: not JSON whitespace
        lambda i: b"\x0b",
        lambda i: garbage().encode(),
        lambda i: f'{{"url": "https://a.test/{i}", "html": "x", "id": "{cat}-{i}", "n": 1.}}'.encode(),
        lambda i: f'{{"url": "https://a.test/{i}", "html": "x", "n": --1}}'.encode(),
        lambda i: f'{{"url": "https://a.test/{i}", "html": "x", "n": tru}}'.encode(),
        lambda i: f'{{"url" "https://a.test/{i}"}}'.encode(),
        lambda i: f'{{"url": "https://a.test/{i}", "html": "x"]'.encode(),
        lambda i: b"{" + b'"a":1,' * rng.randint(1, 50) + b"]",
    ]
    return [variants[i % len(variants)](i) for i in range(n)]


def gen_truncated_json(rng, n, cat):
    out = []
    for i in range(n):
        r = rec(cat, i, page(story(rng, rng.randint(1, 4)), rng.randrange(3)), fetched_at=fetched(i))
        s = json.dumps(r, ensure_ascii=rng.random() < 0.5)
        mode = i % 6
        if mode == 0:
            cut = s.find("\\u") + 3 if "\\u" in s else len(s) // 2  # inside a \u escape
        elif mode == 1:
            cut = s.find("\\") + 1 if "\\" in s else len(s) - 1  # right after a backslash
        elif mode == 2:
            cut = rng.randint(1, 12)  # near the start: inside the first key
        elif mode == 3:
            cut = len(s) - 1  # only the closing brace is missing
        else:
            cut = rng.randint(1, len(s) - 1)
        cut = max(1, min(cut, len(s) - 1))
        out.append(s[:cut].encode("utf-8"))
    return out


def gen_wrong_shape(rng, n, cat):
    u = lambda i: url(cat, i)  # noqa: E731
    h = "<p>The council said that the new barrier was approved.</p>"
    variants = [
        lambda i: [1, 2, i],
        lambda i: [],
        lambda i: [{"url": u(i), "html": h}],
        lambda i: i,
        lambda i: -1.5e10 - i,
        lambda i: f"just a string {i}",
        lambda i: None,
        lambda i: bool(i % 2),
        lambda i: {"id": f"{cat}-{i:05d}", "url": u(i), "html": 42},
        lambda i: {"id": f"{cat}-{i:05d}", "url": {"href": u(i)}, "html": h},
        lambda i: {"id": f"{cat}-{i:05d}", "url": [u(i)], "html": h},
        lambda i: {"id": f"{cat}-{i:05d}", "url": u(i), "html": None},
        lambda i: {"id": f"{cat}-{i:05d}", "url": None, "html": h},
        lambda i: {"id": f"{cat}-{i:05d}", "url": u(i), "html": [h]},
        lambda i: {"id": f"{cat}-{i:05d}", "url": u(i), "html": {"body": h}},
        lambda i: {"id": f"{cat}-{i:05d}", "url": u(i), "html": True},
        lambda i: {"id": i, "url": u(i), "html": h},
        lambda i: {"id": [f"{cat}-{i:05d}"], "url": u(i), "html": h},
        lambda i: {"id": f"{cat}-{i:05d}", "url": u(i), "html": h, "fetched_at": BASE_TIME + i},
        lambda i: {"id": f"{cat}-{i:05d}", "url": u(i), "html": h, "headers": ["content-type"]},
        lambda i: {"id": f"{cat}-{i:05d}", "url": u(i), "html": h, "headers": {"x-n": i}},
        lambda i: {"id": f"{cat}-{i:05d}", "url": u(i), "html": h, "headers": {"x-n": None}},
        lambda i: {"id": f"{cat}-{i:05d}", "url": u(i)},
        lambda i: {"id": f"{cat}-{i:05d}", "url": 10 ** 30 + i, "html": h},
        lambda i: json.dumps({"id": f"{cat}-{i:05d}", "url": u(i), "html": h}),  # double-encoded
    ]
    out = []
    for i in range(n):
        k = i % (len(variants) + 2)
        if k == len(variants):  # duplicate keys
            out.append(f'{{"id": "{cat}-{i:05d}", "url": "{u(i)}", "url": "{u(i)}/2", "html": "x"}}'.encode())
        elif k == len(variants) + 1:
            out.append(f'{{"id": "{cat}-{i:05d}", "url": "{u(i)}", "html": "x", "html": "y"}}'.encode())
        else:
            out.append(enc(variants[k](i), rng))
    return out


def gen_missing_url(rng, n, cat):
    h = lambda: page(story(rng, 1))  # noqa: E731
    variants = [
        lambda i: {"id": f"{cat}-{i:05d}", "html": h()},
        lambda i: {"html": h()},
        lambda i: {},
        lambda i: {"id": f"{cat}-{i:05d}"},
        lambda i: {"id": f"{cat}-{i:05d}", "URL": url(cat, i), "html": h()},
        lambda i: {"id": f"{cat}-{i:05d}", "Url": url(cat, i), "html": h()},
        lambda i: {"id": f"{cat}-{i:05d}", "uri": url(cat, i), "html": h()},
        lambda i: {"id": f"{cat}-{i:05d}", "href": url(cat, i), "html": h(), "fetched_at": fetched(i)},
        lambda i: {"id": f"{cat}-{i:05d}", " url": url(cat, i), "html": h()},
    ]
    return [enc(variants[i % len(variants)](i), rng) for i in range(n)]


def gen_empty_url(rng, n, cat):
    """An empty or blank url and no id: nothing names the page (so no id here by design)."""
    blanks = ["", " ", "\t", "\n\r", "   \t  ", "\u00a0", "\u2003", "\u3000", "\u2028"]
    out = []
    for i in range(n):
        r = {"url": blanks[i % len(blanks)], "html": page(story(rng, 1))}
        if i % 3 == 1:
            r["id"] = ""
        out.append(enc(r, rng))
    return out


def gen_empty_url_with_id(rng, n, cat):
    """The schema allows an empty url when an id names the page."""
    return [enc({"id": f"{cat}-{i:05d}", "url": "", "html": page(story(rng), rng.randrange(3))}, rng)
            for i in range(n)]


def gen_invalid_fetched_at(rng, n, cat):
    bad = ["yesterday", "", "now", "2026-13-01T00:00:00Z", "2026-02-30T00:00:00Z", "2026-11-20T25:00:00Z",
           "20261120T081500Z", "1795161600", "Thu, 20 Nov 2026 08:15:00 GMT", "2026/11/20",
           "2026-11-20T08:15:00+99:00", "\u0000", "2026-11-20T08:15:00\u0000", "T", "-1"]
    return [enc(rec(cat, i, page(story(rng, 2)), fetched_at=bad[i % len(bad)]), rng) for i in range(n)]


def gen_fetched_at_edge(rng, n, cat):
    edge = ["1970-01-01T00:00:00Z", "1969-12-31T23:59:59Z", "0000-01-01T00:00:00Z", "9999-12-31T23:59:59Z",
            "2016-12-31T23:59:60Z", "2026-11-20T08:15:00.123456789Z", "2026-11-20 08:15:00",
            "2026-11-20T08:15:00+14:00", "2026-11-20T08:15:00-12:00", "  2026-11-20T08:15:00Z  ",
            "1900-01-01T00:00:00Z", "2262-04-11T23:47:16Z", "2026-11-20T08:15:00Z\u0000",
            "2026-11-20T08:15:00Zjunk", "2026-11-20t08:15:00z"]
    return [enc(rec(cat, i, page(story(rng, 2)), fetched_at=edge[i % len(edge)]), rng) for i in range(n)]


def gen_fetched_at_offset(rng, n, cat):
    """RFC 3339 times with a numeric UTC offset instead of Z: valid, so the page is processed."""
    offsets = ["+00:00", "-00:00", "+01:00", "-05:00", "+05:30", "+14:00", "-12:00", "+09:45"]
    return [enc(rec(cat, i, page(story(rng, 2)), fetched_at=fetched(i)[:-1] + offsets[i % len(offsets)]), rng)
            for i in range(n)]


def gen_not_utf8(rng, n, cat):
    bads = [b"\xff", b"\xfe\xff", b"\xc0\xaf", b"\xc3(", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xf4\x90\x80\x80",
            b"\xf8\x88\x80\x80\x80", b"\x80", b"\xbf\xbf", b"caf\xe9", b"\x93quoted\x94", b"\xe2\x82",
            b"\xf0\x9f\x98"]
    out = []
    for i in range(n):
        k = i % 18
        base = enc(rec(cat, i, page(story(rng, 1))), ascii_=False)
        if k < len(bads):  # inside the html string
            at = base.index(b'"html": "') + 9 + rng.randint(0, 40)
            line = base[:at] + bads[k] + base[at:]
        elif k == 14:  # the whole line in UTF-16 with a byte order mark
            line = base.decode("utf-8").encode("utf-16")
        elif k == 15:  # Chinese text in a legacy encoding
            line = ('{"id": "%s-%05d", "url": "%s", "html": "<p>\u6cb3\u5824\u5de5\u7a0b\u4eca\u5929\u5f00\u59cb</p>"}'
                    % (cat, i, url(cat, i))).encode("gbk")
        elif k == 16:  # in the url
            line = base.replace(b"hostile.test", b"hostile\xe9.test", 1)
        else:  # outside any string, and a truncated sequence at the very end
            line = base + b" \xc3"
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            pass
        else:
            raise SystemExit(f"not_utf8 record {i} is valid UTF-8")
        out.append(line)
    return out


def gen_nul_raw(rng, n, cat):
    out = []
    for i in range(n):
        base = enc(rec(cat, i, page(story(rng, 1))), ascii_=False)
        k = i % 6
        if k == 0:
            at = base.index(b'"html": "') + 9 + rng.randint(0, 40)
            line = base[:at] + b"\x00" + base[at:]
        elif k == 1:
            line = base.replace(b", ", b",\x00 ", 1)  # between tokens
        elif k == 2:
            line = b"\x00" + base
        elif k == 3:
            line = base + b"\x00"
        elif k == 4:
            line = b"\x00" * rng.randint(1, 4096)
        else:
            line = base.replace(b"hostile.test", b"hostile\x00.test", 1)
        out.append(line)
    return out


def gen_nul_escaped(rng, n, cat):
    """NUL as a \\u0000 escape: valid JSON, so the page must be processed."""
    out = []
    for i in range(n):
        s = story(rng, 2)
        k = i % 7
        r = rec(cat, i, "")
        if k == 0:
            r["html"] = page(s).replace("<p>", "<p>\u0000", 3)
        elif k == 1:
            r["html"] = page(s).replace("<p>", "<p\u0000>").replace("class=", "cl\u0000ass=")
        elif k == 2:
            r["html"] = "\u0000" * rng.randint(1, 100_000)
        elif k == 3:
            r["html"] = page(s).replace(" ", "\u0000")
        elif k == 4:
            r["html"] = page(s)
            r["url"] = url(cat, i) + "\u0000"
        elif k == 5:
            r["html"] = page(s)
            r["id"] = f"{cat}-{i:05d}\u0000x"
        else:
            r["html"] = "<!--\u0000--><script>\u0000</script>" + page(s).replace("e", "e\u0000")
        out.append(enc(r, rng))
    return out


def gen_big_page(rng, n, cat):
    """One page of 50 MB of HTML (the default record limit is 64 MiB)."""
    pool = [paragraph(rng) for _ in range(3000)]
    head = ("<!DOCTYPE html><html><head><title>A very long page of council minutes</title></head>"
            "<body><nav><a href=\"/\">Home</a></nav><article class=\"minutes\"><h1>Minutes</h1>\n")
    tail = "</article><footer>End of the minutes</footer></body></html>"
    parts, size = [head], len(head) + len(tail)
    while size < BIG_PAGE_BYTES:
        p = f"<p>{rng.choice(pool)}</p>\n"
        parts.append(p)
        size += len(p)
    parts.append(tail)
    html_ = "".join(parts)[: BIG_PAGE_BYTES - len(tail)] + tail
    assert len(html_) == BIG_PAGE_BYTES
    return [enc(rec(cat, i, html_, fetched_at=fetched(i)), ascii_=False) for i in range(n)]


def gen_deep_nesting(rng, n, cat):
    d = 10_000
    text = paragraph(rng)
    variants = [
        lambda: "<div>" * d + text + "</div>" * d,
        lambda: "<span>" * d + text,  # never closed
        lambda: "<b><i>" * (d // 2) + text + "</b></i>" * (d // 2),  # misnested
        lambda: "<ul><li>" * d + text,
        lambda: "<table><tr><td>" * d + text,
        lambda: '<a href="#">' * d + text + "</a>" * d,
        lambda: '<div class="content">' * d + text + "</section>" * d,
        lambda: "<svg>" * d + text + "</svg>" * d + "<p>" + text + "</p>",
        lambda: "<p>" * d + text,
        lambda: "<div>" * 100_000 + text + "</div>" * 100_000,  # ten times deeper
        lambda: "<!--" * d + text + "-->" * d,
        lambda: "<article><section><div><blockquote>" * (d // 4) + text,
    ]
    return [enc(rec(cat, i, variants[i % len(variants)]()), ascii_=False) for i in range(n)]


def gen_many_attrs(rng, n, cat):
    text = f"<p>{paragraph(rng)}</p>"
    m = 1_000_000
    variants = [
        lambda: "<div " + " ".join(f"a{k}" for k in range(m)) + ">" + text + "</div>",  # distinct names
        lambda: "<p" + ' x="1"' * m + ">" + text,  # one name repeated
        lambda: '<div class="' + "w " * m + '">' + text + "</div>",  # a million class words
    ]
    return [enc(rec(cat, i, variants[i % len(variants)]()), ascii_=False) for i in range(n)]


def gen_unterminated(rng, n, cat):
    openers = ["<!-- never closed ", "<script>var x = 1; ", "<style>p { color: red } ", "<title>",
               "<textarea>", "<noscript>", "<iframe>", "<xmp>", "<plaintext>", "<![CDATA[", "<svg>",
               "<template>", "<!DOCTYPE html", "<", '<a href="never closed ', "<p class='x", "</",
               "<script><!--", "<!--->", "<?php echo 1; ", "<div", "&#x", "&amp", "<script><!--<script>",
               "<style><!--", "<math>", "<select>", "<noembed>", "<head>", "<![if !IE]>"]
    out = []
    for i in range(n):
        o = openers[i % len(openers)]
        before = "" if i % 2 else f"<p>{paragraph(rng)}</p>"
        out.append(enc(rec(cat, i, before + o + paragraph(rng) + (" " + paragraph(rng)) * rng.randint(0, 3)), rng))
    return out


def gen_markup_only(rng, n, cat):
    tags = ["div", "span", "p", "ul", "li", "table", "tr", "td", "section", "article", "a", "b", "i", "em",
            "h1", "form", "label", "nav", "header", "footer"]
    voids = ["<br>", "<hr>", '<img src="/x.png" alt="">', '<input type="text">', "<wbr>", '<meta charset="utf-8">']
    out = []
    for i in range(n):
        k = i % 5
        if k == 0:
            parts = []
            for _ in range(rng.randint(10, 2000)):
                t = rng.choice(tags)
                parts.append(f'<{t} class="c{rng.randrange(99)}" id="n{rng.randrange(9999)}">' + rng.choice(voids)
                             + ("" if rng.random() < 0.3 else f"</{t}>"))
            h = "".join(parts)
        elif k == 1:
            h = "<br>" * rng.randint(1, 100_000)
        elif k == 2:
            h = "<html><head><script>" + "var a = 1;" * rng.randint(1, 100_000) + "</script></head><body></body></html>"
        elif k == 3:
            h = " \n\t" * rng.randint(0, 1000) + "&nbsp;" * rng.randint(0, 1000)
        else:
            h = "" if i % 2 else "<!-- only a comment -->"
        out.append(enc(rec(cat, i, h), rng))
    return out


def english_stopwords():
    words = [w.strip() for w in STOPWORDS.read_text(encoding="utf-8").splitlines()]
    return [w for w in words if w and not w.startswith("#")]


def gen_stopwords_only(rng, n, cat):
    sw = english_stopwords()
    out = []
    for i in range(n):
        if i == 0:
            h = "<p>" + "the " * 100_000 + "</p>"
        else:
            h = "".join("<p>" + " ".join(rng.choice(sw) for _ in range(rng.randint(5, 200))).capitalize() + ".</p>"
                        for _ in range(rng.randint(1, 30)))
        out.append(enc(rec(cat, i, h), rng))
    return out


def gen_long_word(rng, n, cat):
    letters = "abcdefghijklmnopqrstuvwxyz"
    variants = [
        lambda: "<p>" + "a" * 5_000_000 + "</p>",  # one 5 MB word
        lambda: "<p>The " + "".join(rng.choice(letters) for _ in range(1_000_000)) + " river was approved.</p>",
        lambda: "<p>" + ("the " + "x" * 200_000 + " ") * 10 + "</p>",
        lambda: "<p>" + "a\u0301" * 200_000 + "</p>",  # one grapheme-heavy word
        lambda: "<p>" + "1" * 1_000_000 + "</p>",
        lambda: "<p>" + "\u0430" * 1_000_000 + "</p>",  # Cyrillic a
    ]
    return [enc(rec(cat, i, variants[i % len(variants)]()), ascii_=False) for i in range(n)]


def gen_identical_in_page(rng, n, cat):
    s = "The council said that the new barrier will be built near the river."
    variants = [
        lambda: "<p>" + (s + " ") * 100_000 + "</p>",  # one block
        lambda: ("<p>" + s + "</p>") * 100_000,  # 100,000 blocks
        lambda: "<ul>" + ("<li>" + s + "</li>") * 20_000 + "</ul>",
    ]
    return [enc(rec(cat, i, variants[i % len(variants)]()), ascii_=False) for i in range(n)]


def gen_identical_pages(rng, n, cat):
    """The same page under many ids: one unique, the rest duplicates of it."""
    h = page(story(rng, 5), 0)
    return [enc(rec(cat, i, h), rng) for i in range(n)]


def gen_shared_sentence(rng, n, cat):
    """Distinct pages that share one boilerplate paragraph: long posting lists in the index."""
    shared = "<p>" + " ".join(sentence(rng) for _ in range(6)) + "</p>"
    return [enc(rec(cat, i, page(story(rng, 3), 0, body_suffix=shared)), rng) for i in range(n)]


ARABIC = ("في من على إلى أن هذا كان التي الذي مع عن قال المدينة المجلس النهر الجسر المدرسة السوق الميناء "
          "الحاجز الجديد القديم اليوم بعد قبل وافق رفض أعلن مشروع الماء الطريق المكتبة العام").split()
HEBREW = ("של את על עם זה הוא היא אמר העיר המועצה הנהר הגשר בית הספר השוק הנמל חדש ישן היום אחרי לפני "
          "אישר דחה הודיע פרויקט המים הדרך הספרייה השנה").split()
PERSIAN = "در از به که این بود شهر شورای رود پل مدرسه بازار بندر جدید قدیمی امروز".split()


def gen_rtl(rng, n, cat):
    out = []
    for i in range(n):
        words = [ARABIC, HEBREW, PERSIAN][i % 3]
        lang = ["ar", "he", "fa"][i % 3]
        paras = []
        for _ in range(rng.randint(2, 8)):
            p = " ".join(rng.choice(words) for _ in range(rng.randint(10, 60))) + "."
            if i % 4 == 1:  # mixed direction with an English sentence inside
                p += " " + sentence(rng) + " " + " ".join(rng.choice(words) for _ in range(8))
            if i % 4 == 2:  # bidi controls: RLO, isolates, marks
                p = "\u202e" + p + "\u202c \u2067" + sentence(rng) + "\u2069\u200f"
            paras.append(f"<p>{p}</p>")
        h = f'<html dir="rtl" lang="{lang}"><body><article>' + "".join(paras) + "</article></body></html>"
        out.append(enc(rec(cat, i, h), rng))
    return out


def cjk_text(rng, k, size):
    if k == 0:  # Chinese
        return "".join(chr(rng.randint(0x4E00, 0x9FFF)) if rng.random() < 0.93 else rng.choice("，。、；：？！")
                       for _ in range(size))
    if k == 1:  # Japanese: kana and kanji
        return "".join(rng.choice([chr(rng.randint(0x3041, 0x3096)), chr(rng.randint(0x30A1, 0x30FA)),
                                   chr(rng.randint(0x4E00, 0x9FFF)), "。"]) for _ in range(size))
    if k == 2:  # Korean, with spaces
        return " ".join("".join(chr(rng.randint(0xAC00, 0xD7A3)) for _ in range(rng.randint(1, 5)))
                        for _ in range(size // 3))
    return "".join(chr(rng.randint(0x20000, 0x2A6DF)) for _ in range(size))  # CJK extension B (astral)


def gen_cjk(rng, n, cat):
    out = []
    for i in range(n):
        k = i % 4
        size = 1_000_000 if i == 0 else rng.randint(20, 3000)
        paras = "".join(f"<p>{cjk_text(rng, k, size // 4 + 1)}</p>" for _ in range(4))
        if i % 5 == 1:
            paras += f"<p>{paragraph(rng)}</p>"
        out.append(enc(rec(cat, i, f"<html><body><article>{paras}</article></body></html>"), rng))
    return out


def gen_unicode_misc(rng, n, cat):
    bits = ["\U0001F600", "\U0001F468\u200D\U0001F469\u200D\U0001F467", "e\u0301\u0302\u0303\u0304\u0305" * 20,
            "\uFFFD", "\uFFFE", "\uFFFF", "\U0010FFFF", "\uE000", "\u2028", "\u2029", "\uFEFF", "\u200B", "\u00AD",
            "\uFE0F", "ß", "İ", "ΣΊΣΥΦΟΣ", "ı", "\u1E9E", "ﬁ", "Å", "\u0300" * 500, "\U000E0001", "\u00A0\u2009\u3000",
            "\U0001D400\U0001D401", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "\u0085"]
    out = []
    for i in range(n):
        ps = []
        for _ in range(rng.randint(2, 6)):
            words = sentence(rng).split()
            for _ in range(rng.randint(1, 6)):
                words.insert(rng.randrange(len(words) + 1), rng.choice(bits))
            ps.append("<p>" + " ".join(words) + "</p>")
        out.append(enc(rec(cat, i, "<html><body>" + "".join(ps) + "</body></html>"), rng))
    return out


def gen_control_chars(rng, n, cat):
    ctl = [chr(c) for c in list(range(1, 32)) + list(range(0x7F, 0xA0))]
    out = []
    for i in range(n):
        h = page(story(rng, 2))
        chars = list(h)
        for _ in range(rng.randint(1, 200)):
            chars.insert(rng.randrange(len(chars) + 1), rng.choice(ctl))
        out.append(enc(rec(cat, i, "".join(chars)), rng))
    return out


NUMERIC_REFS = ["&#0;", "&#x0;", "&#xD800;", "&#xDFFF;", "&#xdbff;&#xdc00;", "&#x110000;", "&#1114112;",
                "&#99999999999999999999;", "&#xFFFFFFFFFFFFFFFFFFFF;", "&#x;", "&#;", "&#-1;", "&#x80;", "&#128;",
                "&#x9F;", "&#150;", "&#xFFFE;", "&#xFFFF;", "&#x1FFFF;", "&#x10FFFF;", "&#x1F600;", "&#65;",
                "&#x41", "&#X41;", "&#0000000065;", "&#x00000000000041;", "&#13;", "&#x7F;", "&#1;", "&#xD;",
                "&#x0C;", "&#11;", "&#xFDD0;", "&#x2028;", "&#65", "&#x", "&#", "&", "&;", "&#x20000;",
                "&#xG1;", "&#12a;", "&#x0000000000000000000000000000041;"]


def gen_entities(rng, n, cat):
    """Every named entity of HTML5 (with and without the semicolon, as the table lists them),
    then numeric references, in text, attributes and titles; the first page holds them all."""
    names = sorted(html.entities.html5)
    chunks = [names[k:k + 100] for k in range(0, len(names), 100)]
    out = []
    for i in range(n):
        if i == 0:
            ents = names
        elif i <= len(chunks):
            ents = chunks[i - 1]
        else:
            ents = [rng.choice(NUMERIC_REFS) for _ in range(rng.randint(5, 200))]
        words = sentence(rng).split()
        body = " ".join(f"&{e}" for e in ents)
        # the legacy names without a semicolon, glued to the next letters
        glued = "".join(f"&{e}x" for e in ents if not e.endswith(";"))
        refs = "".join(rng.choice(NUMERIC_REFS) for _ in range(20))
        h = (f"<html><head><title>{' '.join(words[:3])} &{ents[0]} {refs}</title></head><body>"
             f"<p title=\"&{ents[-1]}{refs}\">{' '.join(words)} {body}</p>"
             f"<p>{paragraph(rng)} {refs} {glued}</p><script>&amp; {refs}</script></body></html>")
        out.append(enc(rec(cat, i, h), rng))
    return out


def gen_blank(rng, n, cat):
    blanks = [b"", b" ", b"\t", b"\r", b"   \t  ", b"\x0c", b"\r\r", b" \r"]
    return [blanks[i % len(blanks)] for i in range(n)]


def gen_crlf(rng, n, cat):
    return [valid_line(rng, cat, i) + b"\r" for i in range(n)]


def gen_utf8_bom(rng, n, cat):
    return [b"\xef\xbb\xbf" + valid_line(rng, cat, i) for i in range(n)]


def gen_json_odd(rng, n, cat):
    """Valid page objects written in unusual but legal JSON."""
    def esc_all(s):  # every character as a \\u escape (surrogate pairs for the astral plane)
        out = []
        for ch in s:
            b = ch.encode("utf-16-be")
            out.extend(f"\\u{b[k]:02x}{b[k + 1]:02x}" for k in range(0, len(b), 2))
        return "".join(out)

    out = []
    for i in range(n):
        h = page(story(rng, 2), rng.randrange(3))
        idv, u = f"{cat}-{i:05d}", url(cat, i)
        k = i % 10
        if k == 0:  # keys and values entirely escaped
            line = '{"%s": "%s", "%s": "%s", "%s": "%s"}' % (esc_all("id"), esc_all(idv), esc_all("url"),
                                                            esc_all(u), esc_all("html"), esc_all(h[:3000]))
        elif k == 1:  # escaped slashes, surrogate pair escapes
            line = json.dumps({"id": idv, "url": u, "html": h + " \U0001F600"}).replace("/", "\\/")
        elif k == 2:  # unknown fields of every type
            line = json.dumps({"html": h, "extra": {"a": [1, 2.5, None, True, {"b": "c"}]}, "n": 1e300,
                               "url": u, "status": 200, "id": idv, "body_bytes": None})
        elif k == 3:  # whitespace everywhere
            line = " \t " + json.dumps({"id": idv, "url": u, "html": h}, indent=None, separators=(" , ", " : ")) + " \t "
        elif k == 4:  # id null: the url names the page
            line = json.dumps({"id": None, "url": u, "html": h})
        elif k == 5:  # empty id: the url names the page
            line = json.dumps({"id": "", "url": u, "html": h})
        elif k == 6:  # many headers
            line = json.dumps({"id": idv, "url": u, "html": h,
                               "headers": {f"x-h{j}": "v" * (j % 50) for j in range(10_000)}})
        elif k == 7:  # headers null, fetched_at null
            line = json.dumps({"id": idv, "url": u, "html": h, "headers": None, "fetched_at": None})
        elif k == 8:  # a url that is not a URL
            line = json.dumps({"id": idv, "url": "javascript:alert(1) \u202e ../../etc/passwd", "html": h})
        else:  # html is empty
            line = json.dumps({"id": idv, "url": u, "html": ""})
        out.append(line.encode("utf-8"))
    return out


def gen_json_edge(rng, n, cat):
    """Legal JSON that a decoder may still refuse (limits): either outcome is acceptable."""
    h = "<p>The council said that the new barrier was approved near the river.</p>"
    out = []
    for i in range(n):
        idv, u = f"{cat}-{i:05d}", url(cat, i)
        k = i % 8
        if k == 0:  # 10,000-deep array in an unknown field
            line = '{"id": "%s", "url": "%s", "html": "%s", "deep": %s%s}' % (idv, u, h, "[" * 10_000, "]" * 10_000)
        elif k == 1:  # 10,000-deep objects in an unknown field
            line = '{"id": "%s", "url": "%s", "html": "%s", "deep": %s1%s}' % (idv, u, h, '{"a":' * 10_000, "}" * 10_000)
        elif k == 2:  # a number beyond f64
            line = '{"id": "%s", "url": "%s", "html": "%s", "n": 1e400, "m": -%s}' % (idv, u, h, "9" * 5000)
        elif k == 3:  # a 1 MB url
            line = json.dumps({"id": idv, "url": u + "/" + "a" * 1_000_000, "html": h})
        elif k == 4:  # a 1 MB id
            line = json.dumps({"id": idv + "-" + "i" * 1_000_000, "url": u, "html": h})
        elif k == 5:  # a url of control characters and NUL
            line = json.dumps({"id": idv, "url": "\u0000\u0001\u001f\u007f", "html": h})
        elif k == 6:  # a zero-width space url and no id (not whitespace to a decoder)
            line = json.dumps({"url": "\u200b", "html": h})
        else:  # 100,000-deep top-level nesting
            line = "[" * 100_000 + "]" * 100_000
        out.append(line.encode("utf-8"))
    return out


def gen_lone_surrogate(rng, n, cat):
    """A \\u escape of half a surrogate pair: not a Unicode scalar value."""
    esc = ["\\ud800", "\\udfff", "\\udc00\\ud800", "\\ud83d", "\\ud83d x", "\\ud83d\\u0041"]
    out = []
    for i in range(n):
        base = json.dumps(rec(cat, i, page(story(rng, 1))))
        at = base.index('"html": "') + 9
        out.append((base[:at] + esc[i % len(esc)] + base[at:]).encode("utf-8"))
    return out


def gen_deep_json(rng, n, cat):
    """Deeply nested JSON as the whole record: never a page."""
    variants = [lambda: "[" * 10_000 + "]" * 10_000, lambda: '{"a":' * 10_000 + "1" + "}" * 10_000,
                lambda: "[" * 1_000_000, lambda: '{"url":' * 50_000]
    return [variants[i % len(variants)]().encode() for i in range(n)]


def gen_no_final_newline(rng, n, cat):
    return [valid_line(rng, cat, i) for i in range(n)]


# name: (generator, fixed count or None for a share of the rest, weight, expected outcome, what)
CATEGORIES = {
    "valid": (gen_valid, None, 250, "tagged", "ordinary pages, with near and exact copies"),
    "invalid_json": (gen_invalid_json, None, 140, "dead:invalid_json", "not JSON, or JSON with junk"),
    "truncated_json": (gen_truncated_json, None, 140, "dead:truncated_json", "a valid record cut short"),
    "wrong_shape": (gen_wrong_shape, None, 120, "dead:wrong_shape", "arrays, numbers, html as a number, url as an object, ..."),
    "missing_url": (gen_missing_url, None, 45, "dead:missing_url", "no url field"),
    "empty_url": (gen_empty_url, None, 45, "dead:empty_url", "empty or blank url and no id"),
    "empty_url_with_id": (gen_empty_url_with_id, None, 15, "tagged", "empty url, named by its id"),
    "invalid_fetched_at": (gen_invalid_fetched_at, None, 30, "dead:invalid_fetched_at", "fetched_at not RFC 3339"),
    "fetched_at_edge": (gen_fetched_at_edge, None, 15, "any", "fetched_at at the edges of the calendar and of the syntax"),
    "fetched_at_offset": (gen_fetched_at_offset, None, 8, "tagged", "RFC 3339 fetched_at with a numeric offset"),
    "not_utf8": (gen_not_utf8, None, 90, "dead:not_utf8", "raw bytes that are not UTF-8"),
    "nul_raw": (gen_nul_raw, None, 30, "dead:invalid_json", "raw NUL bytes on the line"),
    "nul_escaped": (gen_nul_escaped, None, 30, "tagged", "\\u0000 inside html, url, id"),
    "lone_surrogate": (gen_lone_surrogate, None, 12, "dead", "\\u escapes of half a surrogate pair"),
    "deep_json": (gen_deep_json, 4, 0, "dead", "10,000 to 1,000,000-deep JSON nesting"),
    "json_odd": (gen_json_odd, None, 40, "tagged", "legal but unusual JSON"),
    "json_edge": (gen_json_edge, None, 16, "any", "legal JSON at decoder limits"),
    "blank": (gen_blank, None, 16, "blank", "empty and whitespace-only lines"),
    "crlf": (gen_crlf, None, 15, "tagged", "CRLF line ends"),
    "utf8_bom": (gen_utf8_bom, None, 6, "any", "a UTF-8 byte order mark before the record"),
    "big_page": (gen_big_page, 1, 0, "tagged", "one 50 MB page"),
    "deep_nesting": (gen_deep_nesting, 12, 0, "tagged", "10,000-deep nested tags (one 100,000-deep)"),
    "many_attrs": (gen_many_attrs, 3, 0, "tagged", "1 million attributes on one tag"),
    "unterminated": (gen_unterminated, None, 60, "tagged", "unterminated comments, scripts, styles, tags"),
    "markup_only": (gen_markup_only, None, 40, "tagged", "pages of only markup"),
    "stopwords_only": (gen_stopwords_only, None, 25, "tagged", "pages of only stopwords"),
    "long_word": (gen_long_word, 6, 0, "tagged", "one very long word (5 MB, 1 MB, ...)"),
    "identical_in_page": (gen_identical_in_page, 3, 0, "tagged", "one sentence 100,000 times in a page"),
    "identical_pages": (gen_identical_pages, None, 80, "tagged", "the same page under many ids"),
    "shared_sentence": (gen_shared_sentence, None, 60, "tagged", "distinct pages sharing a paragraph"),
    "rtl": (gen_rtl, None, 40, "tagged", "Arabic, Hebrew, Persian, bidi controls"),
    "cjk": (gen_cjk, None, 40, "tagged", "Chinese, Japanese, Korean, CJK extension B"),
    "unicode_misc": (gen_unicode_misc, None, 30, "tagged", "emoji, combining marks, noncharacters"),
    "control_chars": (gen_control_chars, None, 20, "tagged", "C0 and C1 controls in html"),
    "entities": (gen_entities, None, 40, "tagged", "every named entity, invalid numeric references"),
    "no_final_newline": (gen_no_final_newline, 1, 0, "tagged", "the last line, without a newline"),
}


def plan(count, skip=()):
    fixed = {c: (0 if c in skip else v[1]) for c, v in CATEGORIES.items() if v[1] is not None}
    shares = {c: v[2] for c, v in CATEGORIES.items() if v[1] is None and c not in skip}
    rest = count - sum(fixed.values())
    if rest < len(shares):
        raise SystemExit(f"--count must be at least {sum(fixed.values()) + len(shares)}")
    total_w = sum(shares.values())
    counts = {c: max(1, rest * w // total_w) for c, w in shares.items()}
    counts["valid"] += rest - sum(counts.values())
    counts.update(fixed)
    counts.update({c: 0 for c in skip})
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--count", type=int, default=1500)
    ap.add_argument("--seed", default="neardup-hostile-1")
    ap.add_argument("--split-dir", type=Path)
    ap.add_argument("--skip", default="", help="comma-separated categories to leave out")
    a = ap.parse_args()

    skip = {c for c in a.skip.split(",") if c}
    unknown = skip - set(CATEGORIES) | (skip & {"valid", "no_final_newline"})
    if unknown:
        raise SystemExit(f"--skip: cannot skip {', '.join(sorted(unknown))}")
    counts = plan(a.count, skip)
    lines = []  # (category, bytes)
    for cat, (gen, _, _, _, _) in CATEGORIES.items():
        if cat == "no_final_newline" or counts[cat] == 0:
            continue
        got = gen(random.Random(f"{a.seed}:{cat}"), counts[cat], cat)
        assert len(got) == counts[cat], cat
        for line in got:
            assert b"\n" not in line, cat
            lines.append((cat, line))
    random.Random(f"{a.seed}:order").shuffle(lines)
    last = gen_no_final_newline(random.Random(f"{a.seed}:no_final_newline"), 1, "no_final_newline")
    lines.append(("no_final_newline", last[0]))

    a.out.parent.mkdir(parents=True, exist_ok=True)
    size = 0
    with open(a.out, "wb") as f:
        for k, (_, line) in enumerate(lines):
            f.write(line)
            size += len(line)
            if k + 1 < len(lines):
                f.write(b"\n")
                size += 1
    if a.split_dir:
        a.split_dir.mkdir(parents=True, exist_ok=True)
        files = {}
        for cat, line in lines:
            if cat not in files:
                files[cat] = open(a.split_dir / f"{cat}.jsonl", "wb")
            files[cat].write(line + b"\n")
        for f in files.values():
            f.close()

    expect = {
        "corpus": a.out.name,
        "seed": a.seed,
        "lines": len(lines),
        "hostile": sum(1 for c, _ in lines if c != "valid"),
        "bytes": size,
        "skipped_categories": sorted(skip),
        "categories": {c: {"count": counts[c], "expect": v[3], "what": v[4]}
                       for c, v in CATEGORIES.items() if counts[c]},
        "line_categories": [c for c, _ in lines],
    }
    Path(str(a.out) + ".expect.json").write_text(json.dumps(expect, indent=1) + "\n", encoding="utf-8")
    print(f"{a.out}: {len(lines)} lines ({expect['hostile']} hostile, the rest ordinary pages), {size:,} bytes, "
          f"{len(expect['categories'])} categories", file=sys.stderr)


if __name__ == "__main__":
    main()
