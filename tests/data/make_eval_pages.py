#!/usr/bin/env python3
"""Builds the labelled corpus of the eval report test: tests/data/eval-pages.jsonl with a
`cluster` field, and beside it the same-template and gray pair lists eval reads.

The pages are the project's own (the fixtures and the articles of examples/make_pages.py),
plus three written here: a rewrite of the storm story that keeps only part of the original
(a gold pair the default threshold misses) and two shop pages in one template whose only
prose is the same long shop notice (a same-template pair the default wrongly joins).

Run from anywhere: python3 tests/data/make_eval_pages.py
"""
import json
import sys

sys.dont_write_bytecode = True
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "examples"))
import make_pages as ex  # noqa: E402

OUT = ROOT / "tests" / "data"

STORM_REWRITE = ("Overnight gale leaves east side in the dark", "Ines Carver", "City", "18 April 2026", [
    "Thousands of households in the eastern districts spent the night without electricity when a gale tore through the city, bringing trees down onto power cables.",
    "The storm reached its peak shortly after midnight, with gusts of more than ninety kilometers an hour recorded at the harbor. Several roads were blocked by fallen branches, and the coast road was closed for three hours while crews cleared a large beech that had fallen across both lanes.",
    "Engineers worked through the morning and most homes had their lights back by breakfast, although a few hundred in the outlying villages were told to expect a longer wait.",
    "No one was hurt, according to the fire service, which answered more than forty calls during the night. Most of them were about fallen trees and loose roof tiles. One family in Mill Lane had to leave their home after a chimney collapsed into the attic.",
    "Shop owners along the seafront spent Saturday sweeping up broken glass and counting the cost, and the council said it would open a fund for small businesses hit by the damage.",
    "More rain is expected early next week, and the weather office has asked people to keep away from the coast path until it has been checked.",
])

SHOP_NOTICE = [
    "About the Harbor Furniture Workshop: every piece in our catalogue is made to order in the old boat shed on Quay Street by a team of six joiners, using timber from forests that are replanted after each harvest. Because nothing is built until you order it, delivery takes between four and seven weeks, and we send a photograph of your piece before it leaves the workshop so that you can check the finish.",
    "Delivery is free within forty kilometers of the harbor, and the driver will carry the piece to any room and take the packaging away. Further afield we use a carrier who will agree a day with you by telephone. If a piece arrives damaged, tell us within a week and we will repair or replace it at no cost.",
    "Reviews are welcome: you may use the tags <b> and <i> in a review, but links & pictures are removed before it is shown, and a review is read by one of the joiners before it appears on the site.",
]


def shop(headline, line):
    paras = [line] + [p.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") for p in SHOP_NOTICE]
    return ex.in_template(ex.TEMPLATE_C, ex.article_c(headline, "Shop Team", "Shop", "1 June 2026", paras), headline)


A, B, C = ex.A, ex.B, ex.C
SHOP = "https://example-shop.test"
PAGES = [
    ("ev-01", f"{A}/city-hall/2026/03/14/council-approves-alder-river-flood-barrier", ex.fixture("story-river.html"), "river"),
    ("ev-02", f"{A}/schools/2026/04/02/northside-primary-new-library", ex.fixture("story-school.html"), "school"),
    ("ev-03", f"{B}/news/alder-river-flood-barrier-approved-1482", ex.fixture("story-river-other-template.html"), "river"),
    ("ev-04", f"{B}/money/farmers-market-station-square-returns-1519", ex.fixture("story-market.html"), "market"),
    ("ev-05", f"{A}/local/2026/04/17/storm-cuts-power-east-side", ex.extra("storm"), "storm"),
    ("ev-06", f"{SHOP}/tables/oak-dining-table", shop("Oak dining table for six", "A long oak table with square legs and a waxed top that seats six people comfortably."), "shop-table"),
    ("ev-07", f"{C}/council/alder-river-flood-gate-dispute-ends", ex.fixture("story-river-edited.html"), "river"),
    ("ev-08", f"{A}/local/2026/03/09/west-side-bus-routes-change", ex.extra("bus"), "bus"),
    ("ev-09", f"{B}/valley/volunteers-plant-trees-old-rail-line-1455", ex.extra("trees"), "trees"),
    ("ev-10", f"{SHOP}/shelves/walnut-bookcase", shop("Walnut bookcase with five shelves", "A tall walnut bookcase with five adjustable shelves and a plinth that hides the fixings."), "shop-bookcase"),
    ("ev-11", f"{C}/culture/harbor-choir-first-prize", ex.extra("choir"), "choir"),
    ("ev-12", f"{B}/city/overnight-gale-east-side-dark-1602", ex.in_template(ex.TEMPLATE_B, ex.article_b(*STORM_REWRITE), STORM_REWRITE[0]), "storm"),
    ("ev-13", "https://example-mirror.test/syndicated/northside-primary-new-library", ex.fixture("story-school.html"), "school"),
    ("ev-14", f"{C}/culture/museum-late-opening-summer", ex.extra("museum"), "museum"),
    ("ev-15", f"{A}/sections", ex.fixture("nav-only.html"), None),
    ("ev-16", f"{B}/live/loading", ex.EMPTYISH, None),
]

SAME_TEMPLATE = [("ev-06", "ev-10"), ("ev-02", "ev-05"), ("ev-04", "ev-09")]
GRAY = [("ev-06", "ev-10")]


def main():
    with open(OUT / "eval-pages.jsonl", "w", encoding="utf-8", newline="\n") as f:
        for pid, url, html, cluster in PAGES:
            f.write(json.dumps({"id": pid, "url": url, "html": html, "cluster": cluster}, ensure_ascii=False) + "\n")
    for name, pairs in [("same_template_pairs", SAME_TEMPLATE), ("gray_pairs", GRAY)]:
        with open(OUT / f"eval-pages-{name}.tsv", "w", encoding="utf-8", newline="\n") as f:
            f.write("id_a\tid_b\n")
            for a, b in pairs:
                f.write(f"{a}\t{b}\n")


if __name__ == "__main__":
    main()
