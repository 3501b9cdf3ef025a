#!/usr/bin/env python3
"""Fails when two modules of a crate import each other, directly or through others.

A module is a top-level module of a crate's src/ (src/stage/*.rs is `stage`), and each file
of src/cli/ is its own module (`cli::eval`). An import is a `crate::x` path (also inside
`crate::{x, y}`) or, within cli, a `super::x` path, outside tests (`#[cfg(test)] mod tests`,
`tests.rs`) and comments. Usage: check-module-cycles.py [SRC_DIR ...] (default: the three crates).
"""

import collections
import os
import re
import sys


def module_of(src, path):
    parts = os.path.relpath(path, src)[:-3].split(os.sep)
    if parts[0] in ("lib", "main"):
        return None
    if parts[0] == "cli":
        return "cli" if len(parts) == 1 or parts[1] == "mod" else "cli::" + parts[1]
    return parts[0]


def edges_of(src):
    edges = collections.defaultdict(set)
    for root, _, files in os.walk(src):
        for f in files:
            # test modules (tests.rs) are compiled for tests only
            if not f.endswith(".rs") or f == "tests.rs":
                continue
            path = os.path.join(root, f)
            m = module_of(src, path)
            if m is None:
                continue
            text = open(path, encoding="utf-8").read()
            text = re.split(r"#\[cfg\(test\)\]\s*mod tests", text)[0]
            text = re.sub(r"//[^\n]*", "", text)
            targets = set()
            for group in re.findall(r"crate::\{([^}]*)\}", text):
                targets.update(re.findall(r"(?:^|,)\s*([a-z_]+)", group))
            for a, b in re.findall(r"crate::([a-z_]+)(?:::([a-z_]+))?", text):
                targets.add("cli::" + b if a == "cli" and b else a)
            if m.startswith("cli::"):
                targets.update("cli::" + t for t in re.findall(r"super::([a-z_]+)", text))
                for group in re.findall(r"super::\{([^}]*)\}", text):
                    targets.update("cli::" + t for t in re.findall(r"[a-z_]+", group))
            for t in targets:
                if t in ("self", "cli::self", m) or m.startswith(t + "::") or t.startswith(m + "::"):
                    continue
                edges[m].add(t)
    return edges


def reaches(edges, a, b):
    seen, todo = {a}, [a]
    while todo:
        for y in edges.get(todo.pop(), ()):
            if y == b:
                return True
            if y not in seen:
                seen.add(y)
                todo.append(y)
    return False


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    srcs = sys.argv[1:] or [
        os.path.join(root, "src"),
        os.path.join(root, "crates", "neardup-core", "src"),
        os.path.join(root, "crates", "neardup-lab", "src"),
    ]
    found = []
    for src in srcs:
        edges = edges_of(src)
        for a in sorted(edges):
            for b in sorted(edges[a]):
                if a < b and reaches(edges, b, a):
                    found.append(f"{os.path.relpath(src, root)}: {a} and {b} import each other")
    for line in found:
        print(line, file=sys.stderr)
    if found:
        sys.exit(1)
    print(f"no import circle between the modules of {len(srcs)} crate(s)")


if __name__ == "__main__":
    main()
