#!/usr/bin/env python3
"""Builds examples/pages.jsonl and examples/bad.jsonl for neardup.

The pages reuse the site templates of the fixtures in tests/data: the fixture pages are
included as they are, and a few more short articles (written for this project) are put into
the same templates by swapping the <article> element and the <title>.

Run from anywhere: python3 examples/make_pages.py
"""
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
OUT = ROOT / "examples"


def fixture(name):
    return (DATA / name).read_text(encoding="utf-8")


def article_a(headline, author, desk, date, paras):
    body = "\n".join(f"  <p>{p}</p>" for p in paras)
    return (f'<article class="story">\n  <h1>{headline}</h1>\n'
            f'  <p class="byline">By {author}, {desk} &mdash; {date}</p>\n{body}\n</article>')


def article_b(headline, author, desk, date, paras):
    body = "\n".join(f'<p class="para">{p}</p>' for p in paras)
    return (f'<article class="story-body" itemscope>\n<h1 class="headline">{headline}</h1>\n'
            f'<div class="meta">{author} &middot; {desk} &middot; <time>{date}</time></div>\n{body}\n</article>')


def article_c(headline, author, desk, date, paras):
    slug = author.lower().replace(" ", "-")
    body = "\n".join(f"<p>{p}</p>" for p in paras)
    return (f'<article>\n<header>\n<h1>{headline}</h1>\n'
            f'<p class="byline">By <a href="/authors/{slug}">{author}</a> | Updated {date}</p>\n'
            f'</header>\n{body}\n</article>')


def in_template(base_html, article_html, headline):
    """Puts an article into the template of base_html (same header, menu, sidebar, footer)."""
    old_headline = re.search(r"<h1[^>]*>(.*?)</h1>", base_html, re.S).group(1)
    html = base_html.replace(f"<title>{old_headline}", f"<title>{headline}", 1)
    start = html.index("<article")
    end = html.index("</article>") + len("</article>")
    return html[:start] + article_html + html[end:]


TEMPLATE_A = fixture("story-school.html")
TEMPLATE_B = fixture("story-market.html")
TEMPLATE_C = fixture("story-river-edited.html")

EXTRA = {
    "bus": (TEMPLATE_A, article_a, "West side bus routes to change next month", "Nadia Holm", "Local", "9 March 2026", [
        "Three bus routes on the west side of the city will change from the first of next month, the transit authority said on Wednesday, as part of a plan to run more frequent services on the busiest streets.",
        "Route 12 will no longer loop through the industrial park on weekdays. Instead, it will run straight along Fenwick Road to the hospital, with a bus every ten minutes during the morning and evening rush. Route 14 will be merged with Route 15, and the new combined line will keep the number 14.",
        "The authority said the changes were based on a year of passenger counts, which showed that some stops in the industrial park were used by fewer than twenty people a day. A small shuttle will still serve the park when the factory shifts change.",
        "Not everyone is pleased. Residents of Larch Hill, where two stops will be removed, said older people would now have a longer walk up a steep street to reach the nearest bus. &#8220;It is fine if you are young and fit,&#8221; said Gerald Amos, who has lived on the hill for forty years. &#8220;It is not fine if you are carrying shopping in the rain.&#8221;",
        "The transit authority said it would look again at the Larch Hill stops after six months. New timetables will be posted at stops next week and are already available at the central station.",
    ]),
    "trees": (TEMPLATE_B, article_b, "Volunteers plant four hundred trees along the old rail line", "Owen Brandt", "The Valley", "22 March 2026", [
        "More than a hundred volunteers spent Sunday planting four hundred young trees along the old rail line that runs between the gasworks and the northern allotments, turning a strip of gravel into what organizers hope will become a shaded walking path.",
        "The line closed to trains in the 1970s and has been used as an informal shortcut ever since. The city bought the land last year and handed it to a neighborhood group, which has spent the winter clearing rubbish and broken fencing.",
        "Most of the trees are oak, hornbeam and wild cherry, chosen because they cope well with dry summers. Each one was planted with a wooden stake and a plastic guard to keep rabbits away from the bark. &#8220;In ten years this will be a green tunnel,&#8221; said Priya Natarajan, who chairs the group. &#8220;Today it looks like a row of sticks, but you have to start somewhere.&#8221;",
        "Children from two nearby schools planted a small orchard of apple and pear trees at the southern end of the path. Each class will look after its own tree and keep a diary of how it grows.",
        "The group is looking for more volunteers to water the trees during the first two summers. Anyone who wants to help can sign up at the community center on Wharf Road.",
    ]),
    "choir": (TEMPLATE_C, article_c, "Harbor choir takes first prize at regional festival", "Sofia Lund", "Culture", "30 March 2026", [
        "The Harbor Community Choir won first prize in the mixed voices category at the regional choral festival on Saturday, beating eleven other choirs from across the region, some of them with twice as many singers.",
        "The choir, which has forty members aged between seventeen and eighty-one, sang three pieces: a traditional sea song, a setting of a poem by a local writer and a lively spiritual that brought part of the audience to its feet.",
        "Conductor Miriam Oduya said the win came after months of extra rehearsals on Tuesday evenings in the back hall of the sailing club. &#8220;We are not professionals,&#8221; she said. &#8220;We have a nurse, two bus drivers, a retired judge and a lot of students. What we have is time together and a lot of patience.&#8221;",
        "The judges praised the choir for its clear diction and for the balance between the high and the low voices. The prize includes a small grant, which the choir plans to spend on sheet music and on a coach to take the singers to the national festival in the autumn.",
        "The choir will give a free concert in the harbor church next month. New members are welcome, and no audition is needed for the first season.",
    ]),
    "storm": (TEMPLATE_A, article_a, "Storm cuts power to two thousand homes overnight", "Mara Ellison", "City Desk", "17 April 2026", [
        "About two thousand homes on the east side of the city lost power overnight after strong winds brought down trees across several overhead lines, the electricity network said on Friday morning.",
        "The storm reached its peak shortly after midnight, with gusts of more than ninety kilometers an hour recorded at the harbor. Several roads were blocked by fallen branches, and the coast road was closed for three hours while crews cleared a large beech that had fallen across both lanes.",
        "By nine in the morning, power had been restored to all but about three hundred homes. The network said engineers were working to reconnect the remaining households, most of them in the hamlets beyond the ring road, before the end of the day.",
        "No one was hurt, according to the fire service, which answered more than forty calls during the night. Most of them were about fallen trees and loose roof tiles. One family in Mill Lane had to leave their home after a chimney collapsed into the attic.",
        "Forecasters expect calmer weather over the weekend, although another band of rain is due on Monday. The city has asked residents to report damaged trees in parks and along streets rather than trying to remove them themselves.",
    ]),
    "museum": (TEMPLATE_C, article_c, "Museum to stay open late for summer exhibition", "Daniel Frey", "Culture", "5 May 2026", [
        "The city museum will stay open until nine in the evening on Thursdays and Fridays this summer to make room for the crowds expected at its new exhibition of shipbuilding models and tools.",
        "The exhibition, which opens on the first of June, brings together more than three hundred objects from the old harbor yards, including a six-meter model of a cargo steamer that took two craftsmen nearly a decade to build. Many of the pieces have never been shown in public before and were found in a storeroom during repairs to the museum roof.",
        "Curator Daniel Haugen said the late opening was a response to visitor surveys. &#8220;People told us they could not come during the day because they were at work,&#8221; he said. &#8220;This gives them a chance to see the collection without rushing, and to bring their children after dinner.&#8221;",
        "Entry to the exhibition will be free on the first Friday of each month. On other days, tickets cost eight euros for adults, and children under sixteen get in free.",
        "The museum is also looking for former shipyard workers who would be willing to share their memories. Recorded interviews will be added to the exhibition over the course of the summer.",
    ]),
}


def extra(key):
    base, render, headline, author, desk, date, paras = EXTRA[key]
    return in_template(base, render(headline, author, desk, date, paras), headline)


EMPTYISH = ('<!DOCTYPE html><html><head><title>Loading</title>'
            '<script>var the_title = "the live page is loading";</script></head>'
            '<body><div id="app"></div></body></html>')

A = "https://example-news-a.test"
B = "https://example-news-b.test"
C = "https://example-news-c.test"
PAGES = [
    ("ex-001", f"{A}/city-hall/2026/03/14/council-approves-alder-river-flood-barrier", fixture("story-river.html"), "2026-11-20T08:15:00Z"),
    ("ex-002", f"{A}/schools/2026/04/02/northside-primary-new-library", fixture("story-school.html"), "2026-11-20T08:16:10Z"),
    ("ex-003", f"{B}/news/alder-river-flood-barrier-approved-1482", fixture("story-river-other-template.html"), "2026-11-20T08:17:45Z"),
    ("ex-004", f"{B}/money/farmers-market-station-square-returns-1519", fixture("story-market.html"), "2026-11-20T08:18:02Z"),
    ("ex-005", f"{A}/local/2026/03/09/west-side-bus-routes-change", extra("bus"), "2026-11-20T08:19:30Z"),
    ("ex-006", f"{B}/valley/volunteers-plant-trees-old-rail-line-1455", extra("trees"), "2026-11-20T08:20:11Z"),
    ("ex-007", f"{C}/council/alder-river-flood-gate-dispute-ends", fixture("story-river-edited.html"), "2026-11-20T08:21:40Z"),
    ("ex-008", f"{C}/culture/harbor-choir-first-prize", extra("choir"), "2026-11-20T08:22:05Z"),
    ("ex-009", f"{A}/local/2026/04/17/storm-cuts-power-east-side", extra("storm"), "2026-11-20T08:23:18Z"),
    ("ex-010", f"{C}/culture/museum-late-opening-summer", extra("museum"), "2026-11-20T08:24:00Z"),
    ("ex-011", "https://example-mirror.test/syndicated/northside-primary-new-library", fixture("story-school.html"), "2026-11-20T08:25:37Z"),
    ("ex-012", f"{A}/sections", fixture("nav-only.html"), "2026-11-20T08:26:09Z"),
    ("ex-013", f"{B}/live/loading", EMPTYISH, "2026-11-20T08:27:50Z"),
]


def main():
    with open(OUT / "pages.jsonl", "w", encoding="utf-8", newline="\n") as f:
        for pid, url, html, fetched_at in PAGES:
            rec = {"id": pid, "url": url, "html": html, "fetched_at": fetched_at}
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")

    good = {"id": "bad-005", "url": f"{B}/news/ferry-winter-timetable",
            "html": "<html><head><title>Ferry timetable changes for the winter</title></head><body><article><h1>Ferry timetable changes for the winter</h1><p>The harbor ferry will run a reduced timetable from the first of November, with the last boat of the evening leaving the north pier at half past eight. The operator said that only a few passengers used the late crossings last winter, and that the savings would help pay for a new engine.</p></article></body></html>",
            "fetched_at": "2026-11-20T09:00:05Z"}
    lines = [
        b"this line is not JSON at all\n",
        b'{"id": "bad-002", "url": "https://example-news-a.test/local/cut-off", "html": "<p>The record ends in the mid\n',
        json.dumps({"id": "bad-003", "html": "<p>A page without an address.</p>", "fetched_at": "2026-11-20T09:00:02Z"}).encode() + b"\n",
        b'{"id": "bad-004", "url": "https://example-news-b.test/news/latin1", "html": "<p>Caf\xe9 au lait \xff\xfe costs two euros</p>", "fetched_at": "2026-11-20T09:00:03Z"}\n',
        json.dumps(good, ensure_ascii=False).encode("utf-8") + b"\n",
    ]
    with open(OUT / "bad.jsonl", "wb") as f:
        f.writelines(lines)


if __name__ == "__main__":
    main()
