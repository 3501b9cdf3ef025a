#!/usr/bin/env python3
"""Fails when modules of a crate import each other, directly or through others (a circle).

A module is a file of a crate's module tree, read from the crate's root (src/lib.rs,
src/main.rs, src/bin/*.rs) through its `mod` declarations (`x.rs` or `x/mod.rs`, `#[path]`);
a module inline in a file (`mod x { ... }`) is part of its file. Module A imports module B
when A's code names an item that B defines, or B itself:

- in a `use`, grouped or not (`use super::{b, c::C}`, `use crate::x::y as z`, `use x::*`);
- in a path in the code: `super::b::B` in a signature, a field, an impl, a generic argument,
  `crate::x::f()`, `super::super::x::f()`, or `z::item` through a module imported as `z`.

A path is resolved as the compiler does: `crate::`, `self::`, `super::`, a module's own
items, child modules and imports, and through re-exports to the module that defines the
item (a child naming `super::Item` that its parent re-exports from a sibling imports the
sibling, not its parent). A `mod x;` declaration alone imports nothing, so a parent using
its child's items is no circle unless the child uses the parent's. Not counted: comments
and string literals; paths into other crates (std, `neardup_core::`, another crate's
modules re-exported under this crate's names); test code, that is `#[cfg(test)]` modules
(`mod tests { use super::*; ... }`, a `tests.rs` declared `#[cfg(test)] mod tests;`) and
`#[cfg(test)]` items. Each crate is checked on its own.

Each circle is printed with its modules in order and, for each import, the first line that
makes it (`file:line: text`). The circles that stand today are listed, one a line as the
report names them, in scripts/module-circles.known (read when no SRC_DIR is given, or
with --known): a circle not in the list fails, and so does a listed circle that is gone,
so the list only shrinks. Exit status: 1 when there is a circle not listed (or a listed
one gone), 0 otherwise, 2 on a usage error.

Usage: check-module-cycles.py [SRC_DIR ...]   (default: the three crates' src/)
       check-module-cycles.py --known FILE    (circles that stand, to be broken)
       check-module-cycles.py --self-test     (the checker on a small crate tree of its own)
"""

import argparse
import bisect
import collections
import contextlib
import io
import os
import re
import sys
import tempfile

IDENT = r"(?:r#)?[A-Za-z_]\w*"
RAW_STRING = re.compile(r'[bc]?r(#*)"')
ATTR = re.compile(r"#\s*\[")
INNER_ATTRS = re.compile(r"\s*#\s*!\s*\[")
MOD_DECL = re.compile(r"(?<![\w$])mod\s+(" + IDENT + r")\s*([;{])")
USE = re.compile(r"(?<![\w$])use\b")
USE_TOKEN = re.compile(r"\s*(::|\$?" + IDENT + r"|\S)")
EXTERN_CRATE = re.compile(
    r"(?<![\w$])extern\s+crate\s+(" + IDENT + r")(?:\s+as\s+(" + IDENT + r"))?\s*;"
)
RESTRICTED_VIS = re.compile(r"(?<![\w$])pub\s*\(\s*in\s[^)]*\)")
DEF = re.compile(
    r"(?<![\w$])(?:fn|struct|enum|union|trait|type|const|static|mod)\s+(?:mut\s+)?"
    r"(?:(?:unsafe|async|extern)\s+)*(?:fn\s+)?(" + IDENT + r")"
)
MACRO_DEF = re.compile(r"(?<![\w$])macro_rules\s*!\s*(" + IDENT + r")")
MACRO_EXPORT = re.compile(r"#\s*\[\s*macro_export\b[^\]]*\]\s*macro_rules\s*!\s*(" + IDENT + r")")
PATH = re.compile(r"(?<![\w$])(\$?" + IDENT + r")((?:\s*::\s*" + IDENT + r")+)")
PATH_SEP = re.compile(r"\s*::\s*")
CFG_TOKEN = re.compile(r"\s*(\w+|\S)")

# What a path names: a module, an item of a module, something outside the crate (another
# crate, the prelude, a generic parameter), or nothing the checker can find.
EXTERNAL = ("external", None)
UNKNOWN = ("unknown", None)


def unraw(name):
    return name[2:] if name.startswith("r#") else name


def blank(text):
    """`text` with every character but line ends replaced by a space."""
    return re.sub(r"[^\n]", " ", text)


def strip_code(text):
    """The text with comments and the contents of string and character literals blanked.

    Offsets and line ends are kept, so a position in the result is the same in the text.
    """
    out = []
    i, last, n = 0, 0, len(text)

    def cut(a, b):
        # blanks text[a:b] (everything before a is kept as it is)
        nonlocal last
        out.append(text[last:a])
        out.append(blank(text[a:b]))
        last = b

    while i < n:
        c = text[i]
        if c == "/" and text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            cut(i, j)
            i = j
        elif c == "/" and text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            cut(i, j)
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            cut(i + 1, min(j, n))
            i = j + 1
        elif c in "bcr" and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] in "_$")):
            m = RAW_STRING.match(text, i)
            if m is None:
                i += 1
                continue
            end = '"' + m.group(1)
            j = text.find(end, m.end())
            j = n if j < 0 else j
            cut(m.end(), j)
            i = j + len(end)
        elif c == "'":
            if text.startswith("\\", i + 1):
                j = text.find("'", i + 3)
                j = n if j < 0 else j
                cut(i + 1, j)
                i = j + 1
            elif i + 2 < n and text[i + 2] == "'":
                cut(i + 1, i + 2)
                i += 3
            else:
                i += 1  # a lifetime or a label
        else:
            i += 1
    out.append(text[last:])
    return "".join(out)


def cfg_test_only(tokens):
    """Whether a `cfg(...)` predicate (its tokens) holds only when compiling tests."""

    def parse(i):
        # one predicate at tokens[i]: (kind, arguments), next index
        name = tokens[i] if i < len(tokens) else ""
        i += 1
        if i < len(tokens) and tokens[i] == "(":
            args, i = [], i + 1
            while i < len(tokens) and tokens[i] != ")":
                arg, i = parse(i)
                args.append(arg)
                if i < len(tokens) and tokens[i] == ",":
                    i += 1
            return (name, args), i + 1
        while i < len(tokens) and tokens[i] not in (",", ")"):
            i += 1  # `key = "value"`
        return (name, None), i

    def only(pred):
        name, args = pred
        if args is None:
            return name == "test"
        if name == "all":
            return any(only(a) for a in args)
        if name == "any":
            return bool(args) and all(only(a) for a in args)
        return False

    return only(parse(0)[0])


class Source:
    """One file: its text, its code (comments and literals blanked), braces and lines."""

    def __init__(self, path):
        self.path = path
        with open(path, encoding="utf-8") as f:
            self.text = f.read()
        self.code = strip_code(self.text)
        self.line_ends = [m.start() for m in re.finditer("\n", self.text)]
        self.line_texts = self.text.split("\n")
        # braces: offsets and the depth after each, for the depth at any offset
        self.braces, self.after = [], []
        # the closer of every opening bracket
        self.close = {}
        depth, stack = 0, []
        for m in re.finditer(r"[()\[\]{}]", self.code):
            c, at = m.group(), m.start()
            if c in "([{":
                stack.append(at)
            elif stack:
                self.close[stack.pop()] = at
            if c in "{}":
                depth = depth + 1 if c == "{" else max(0, depth - 1)
                self.braces.append(at)
                self.after.append(depth)
        # attributes by the offset right after them: (start, content)
        self.attrs = {}
        # the spans of `#[cfg(test)]` items, the attribute included
        self.test_spans = []
        for m in ATTR.finditer(self.code):
            end = self.close.get(m.end() - 1)
            if end is None:
                continue
            content = self.code[m.end() : end]
            self.attrs[end + 1] = (m.start(), content)
            cfg = re.match(r"\s*cfg\s*\((.*)\)\s*$", content, re.S)
            if cfg and cfg_test_only(CFG_TOKEN.findall(cfg.group(1))):
                self.test_spans.append((m.start(), self.item_end(end + 1)))

    def depth_at(self, pos):
        k = bisect.bisect_left(self.braces, pos)
        return self.after[k - 1] if k else 0

    def line_of(self, pos):
        return bisect.bisect_left(self.line_ends, pos) + 1

    def in_test(self, pos):
        return any(a <= pos < b for a, b in self.test_spans)

    def item_end(self, pos):
        """The end of the item (or field, statement, match arm) whose attributes end at pos."""
        code, n = self.code, len(self.code)
        while True:  # the item's other attributes
            m = ATTR.match(code, pos) or re.compile(r"\s+").match(code, pos)
            if m is None:
                break
            if m.re is ATTR:
                close = self.close.get(m.end() - 1)
                if close is None:
                    break
                pos = close + 1
            else:
                pos = m.end()
        # a `const`, `static`, `let`, `type` or `use` ends at its `;`, even after a `{ ... }`
        ends_at_semicolon = re.match(
            r"(?:pub\s*(?:\([^)]*\))?\s*)?(?:const|static|let|type|use)\b(?!\s+(?:fn|unsafe)\b)",
            code[pos : pos + 200],
        )
        depth, angle, header = 0, 0, True
        i = pos
        while i < n:
            c = code[i]
            if c in "([{":
                depth += 1
                header = header and c != "{"
            elif c in ")]}":
                if depth == 0:
                    return i  # the closer of what holds the item
                depth -= 1
                if depth == 0 and c == "}" and not ends_at_semicolon:
                    return i + 1
            elif depth == 0:
                if c == ";":
                    return i + 1
                if c == "," and angle == 0:
                    return i + 1
                if header and c == "<":
                    angle += 1
                elif header and c == ">" and code[i - 1] not in "-=":
                    angle = max(0, angle - 1)
                elif header and c == "=" and code[i + 1 : i + 2] not in (">", "="):
                    header = False  # generics no longer: `a < b` may follow
            i += 1
        return n

    def inner_test(self, pos):
        """Whether the inner attributes at pos (`#![cfg(test)]`) make a module test-only."""
        while True:
            m = INNER_ATTRS.match(self.code, pos)
            if m is None:
                return False
            end = self.close.get(m.end() - 1)
            if end is None:
                return False
            cfg = re.match(r"\s*cfg\s*\((.*)\)\s*$", self.code[m.end() : end], re.S)
            if cfg and cfg_test_only(CFG_TOKEN.findall(cfg.group(1))):
                return True
            pos = end + 1

    def attrs_before(self, pos):
        """The contents of the attributes of the item at pos (its visibility skipped)."""
        before = self.code[:pos].rstrip()
        vis = re.search(r"pub\s*(?:\([^)]*\))?$", before)
        if vis:
            before = before[: vis.start()].rstrip()
        found = []
        while len(before) in self.attrs:
            start, content = self.attrs[len(before)]
            found.append((start, content))
            before = before[:start].rstrip()
        return found


class Module:
    """A module: a file, or a `mod x { ... }` inline in one, with what it defines and names."""

    def __init__(self, name, parent, source, span, depth, directory):
        self.name = name  # its path from the crate root, `crate::stage::kafka`
        self.parent = parent
        self.source = source
        self.span = span  # its code in the file: (start, end)
        self.depth = depth  # the brace depth of its items
        self.dir = directory  # where the files of its `mod x;` children are
        self.children = {}
        self.items = set()
        self.bindings = collections.defaultdict(list)  # name -> paths its `use`s bring in
        self.globs = []  # paths of its `use x::*`
        self.names = []  # every path its uses and code name: (segments, offset, shown)


class Crate:
    """One crate's module tree, read from its root file."""

    def __init__(self, root_file):
        self.modules = []
        self.macros = {}  # `#[macro_export]` macros (named `crate::m!`) -> defining module
        self.self_names = set()  # `extern crate self as name`
        self.warnings = []
        self.root = self.load(root_file, "crate", None, True)

    def load(self, path, name, parent, mod_rs):
        """The module of a file (None for a test module)."""
        src = Source(path)
        if src.inner_test(0):
            return None
        d = os.path.dirname(path)
        directory = d if mod_rs else os.path.join(d, os.path.basename(path)[:-3])
        m = Module(name, parent, src, (0, len(src.code)), 0, directory)
        self.fill(m)
        return m

    def child_file(self, m, name, at):
        """The file of `mod name;` declared at offset `at` of m's file."""
        src = m.source
        for start, content in src.attrs_before(at):
            if re.match(r'\s*path\s*=\s*"', content):
                # the attribute's string, from the text (it is blanked in the code)
                q = src.code.index('"', start) + 1
                value = src.text[q : src.code.index('"', q)]
                base = m.dir if m.span[0] > 0 else os.path.dirname(src.path)
                return os.path.normpath(os.path.join(base, value)), True
        for f, mod_rs in ((name + ".rs", False), (os.path.join(name, "mod.rs"), True)):
            if os.path.isfile(os.path.join(m.dir, f)):
                return os.path.join(m.dir, f), mod_rs
        return None, False

    def fill(self, m):
        """Reads m's child modules, items, imports and paths."""
        self.modules.append(m)
        src = m.source
        start, end = m.span
        holes = [(0, start), (end, len(src.code))]
        holes += [s for s in src.test_spans if start <= s[0] < end]
        for d in MOD_DECL.finditer(src.code, start, end):
            at = d.start()
            if src.depth_at(at) != m.depth or src.in_test(at):
                continue
            name = unraw(d.group(1))
            if d.group(2) == ";":
                path, mod_rs = self.child_file(m, name, at)
                if path is None:
                    self.warnings.append((src.path, src.line_of(at), name))
                    continue
                child = self.load(path, f"{m.name}::{name}", m, mod_rs)
            else:
                body = d.end() - 1
                close = src.close.get(body, end)
                holes.append((body + 1, close))
                if src.inner_test(body + 1):
                    continue
                child = Module(
                    f"{m.name}::{name}", m, src, (body + 1, close), m.depth + 1,
                    os.path.join(m.dir, name),
                )
                self.fill(child)
            if child is not None:
                m.children[name] = child
        code = blank_spans(src.code, holes)
        # its imports: `use` trees and `extern crate`
        cut = []
        for u in USE.finditer(code):
            leaves, stop = use_leaves(code, u.end())
            cut.append((u.start(), stop))
            for segs, name, glob, at in leaves:
                if not segs:
                    continue
                if glob:
                    m.globs.append(segs)
                elif name is not None:
                    m.bindings[name].append(segs)
                m.names.append((segs, at, "::".join(segs + (["*"] if glob else []))))
        for e in EXTERN_CRATE.finditer(code):
            cut.append((e.start(), e.end()))
            name, alias = unraw(e.group(1)), unraw(e.group(2) or e.group(1))
            if name == "self":
                m.bindings[alias].append(["crate"])
                if m.parent is None:
                    self.self_names.add(alias)
            else:
                m.bindings[alias].append(["::", name])
        cut += [(v.start(), v.end()) for v in RESTRICTED_VIS.finditer(code)]
        code = blank_spans(code, cut)
        # its items
        for d in DEF.finditer(code):
            if src.depth_at(d.start()) == m.depth:
                m.items.add(unraw(d.group(1)))
        for d in MACRO_DEF.finditer(code):
            m.items.add(unraw(d.group(1)))
        for d in MACRO_EXPORT.finditer(code):
            self.macros[unraw(d.group(1))] = m
        # the paths in its code
        for p in PATH.finditer(code):
            if code[: p.start()].rstrip().endswith("::"):
                continue  # `::x::y` (another crate) or the rest of `a::<T>::b`
            segs = [unraw(s) for s in PATH_SEP.split(p.group(0))]
            m.names.append((segs, p.start(), "::".join(segs)))

    def member(self, m, name, seen):
        """What `name` is in module m (as `m::name`, or a first segment inside m)."""
        key = (id(m), name)
        if key in seen:
            return UNKNOWN
        seen = seen | {key}
        if name in m.children:
            return ("module", m.children[name])
        found = UNKNOWN
        for segs in m.bindings.get(name, ()):
            r = self.resolve(m, segs, seen)
            if r[0] in ("module", "item"):
                return r
            if r is EXTERNAL:
                found = EXTERNAL
        if found is EXTERNAL:
            return EXTERNAL
        if name in m.items:
            return ("item", m)
        for segs in m.globs:
            g = self.resolve(m, segs, seen)
            if g[0] == "module":
                r = self.member(g[1], name, seen)
                if r is not UNKNOWN:
                    return r
        if m.parent is None and name in self.macros:
            return ("item", self.macros[name])
        return UNKNOWN

    def resolve(self, scope, segs, seen=frozenset()):
        """What the path `segs` names when written in module `scope`."""
        first, i = segs[0], 1
        if first == "::":
            return EXTERNAL
        if first in ("crate", "$crate"):
            cur = self.root
        elif first in ("self", "super"):
            cur, i = scope, 0
            while i < len(segs) and segs[i] in ("self", "super"):
                if segs[i] == "super":
                    cur = cur.parent
                    if cur is None:
                        return UNKNOWN
                i += 1
        else:
            r = self.member(scope, first, seen)
            if r is UNKNOWN:
                if first not in self.self_names:
                    return EXTERNAL  # another crate, the prelude, a generic parameter
                r = ("module", self.root)
            if r[0] != "module":
                return r
            cur = r[1]
        while i < len(segs):
            r = self.member(cur, segs[i], seen)
            if r is UNKNOWN:
                return ("item", cur)  # made where the checker does not look (a macro, say)
            if r[0] != "module":
                return r
            cur = r[1]
            i += 1
        return ("module", cur)

    def imports(self):
        """{(file, file): (line, shown path)}: the first line of each file naming the other."""
        found = {}
        for m in self.modules:
            for segs, at, shown in m.names:
                kind, target = self.resolve(m, segs)
                if kind not in ("module", "item") or target.source.path == m.source.path:
                    continue
                key = (m.source.path, target.source.path)
                line = m.source.line_of(at)
                if key not in found or line < found[key][0]:
                    found[key] = (line, shown, m.source)
        return found


def blank_spans(code, spans):
    """`code` with the given (start, end) spans blanked."""
    out, last = [], 0
    for a, b in sorted(spans):
        a = max(a, last)
        if a >= b:
            continue
        out.append(code[last:a])
        out.append(blank(code[a:b]))
        last = b
    out.append(code[last:])
    return "".join(out)


def use_leaves(code, pos):
    """The paths of the `use` tree at pos and the offset after its `;`.

    A path is (segments, the name it binds or None, whether a glob, offset of its last name).
    """
    toks, depth, stop = [], 0, len(code)
    for t in USE_TOKEN.finditer(code, pos):
        tok = t.group(1)
        toks.append((tok, t.start(1)))
        depth += {"{": 1, "}": -1}.get(tok, 0)
        if tok == ";" and depth <= 0:
            stop = t.end()
            break
    toks += [(";", stop)] * 3
    leaves = []

    def tree(i, prefix):
        segs = list(prefix)
        if toks[i][0] == "::":
            if not segs:
                segs.append("::")
            i += 1
        while i < len(toks) - 3:
            tok, at = toks[i]
            if tok == "*":
                leaves.append((segs, None, True, at))
                return i + 1
            if tok == "{":
                i += 1
                while i < len(toks) - 3 and toks[i][0] != "}":
                    j = tree(i, segs)
                    i = j if j > i else i + 1
                    if toks[i][0] == ",":
                        i += 1
                return i + 1
            if not re.match(r"\$?" + IDENT + "$", tok):
                return i
            segs = segs + [unraw(tok)]
            i += 1
            if toks[i][0] == "::":
                i += 1
                continue
            alias = None
            if toks[i][0] == "as":
                alias, i = unraw(toks[i + 1][0]), i + 2
            path = segs[:-1] if segs[-1] == "self" else segs
            name = alias or (path[-1] if path else None)
            leaves.append((path, None if name == "_" else name, False, at))
            return i
        return i

    tree(0, [])
    return leaves, stop


def crate_roots(src):
    roots = [os.path.join(src, f) for f in ("lib.rs", "main.rs")]
    bin_dir = os.path.join(src, "bin")
    if os.path.isdir(bin_dir):
        for f in sorted(os.listdir(bin_dir)):
            p = os.path.join(bin_dir, f)
            roots.append(os.path.join(p, "main.rs") if os.path.isdir(p) else p)
    return [r for r in roots if r.endswith(".rs") and os.path.isfile(r)]


def strongly_connected(graph):
    """The strongly connected components of {node: {node}}, each sorted."""
    index, low, stack, on_stack, comps = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return comps


def shortest_path(graph, a, b, inside):
    """The shortest path a → … → b within `inside` (nodes in order), or None."""
    prev, todo = {a: None}, collections.deque([a])
    while todo:
        v = todo.popleft()
        if v == b:
            path = []
            while v is not None:
                path.append(v)
                v = prev[v]
            return path[::-1]
        for w in sorted(graph.get(v, ())):
            if w in inside and w not in prev:
                prev[w] = v
                todo.append(w)
    return None


def circles(edges):
    """The import circles of {(a, b): ...}: for every import between two modules that import
    each other (directly or through others), the shortest circle it is on. A list of
    (modules of the component, [circle, ...]), a circle being its modules in order, the
    smallest first."""
    graph = collections.defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
    found = []
    for comp in strongly_connected(graph):
        if len(comp) < 2:
            continue
        inside, cycles = set(comp), []
        for a in comp:
            for b in sorted(graph[a] & inside):
                cycle = [a] + shortest_path(graph, b, a, inside)[:-1]
                k = cycle.index(min(cycle))
                cycle = tuple(cycle[k:] + cycle[:k])
                if cycle not in cycles:
                    cycles.append(cycle)
        found.append((comp, sorted(cycles, key=lambda c: (len(c), c))))
    return found


def check(src):
    """The circles of the crates whose roots are in `src` (each crate on its own).

    Returns ([(modules of a component, [circle, ...], the crate's imports)], warnings).
    """
    found, seen, warnings = [], set(), []
    for root in crate_roots(src):
        crate = Crate(root)
        warnings += crate.warnings
        edges = crate.imports()
        for comp, cycles in circles(edges):
            cycles = [c for c in cycles if c not in seen]
            seen.update(cycles)
            if cycles:
                found.append((comp, cycles, edges))
    return found, warnings


def report(src, label, shown_from, known=frozenset()):
    """Prints the circles of the crate(s) in `src` that are not in `known`; returns every
    circle found, each as `LABEL: a.rs -> b.rs -> a.rs` (the form of the known list)."""
    comps, warnings = check(src)
    for path, line, name in warnings:
        print(f"warning: {os.path.relpath(path, shown_from)}:{line}: no file for module `{name}`",
              file=sys.stderr)

    def mod(f):
        return os.path.relpath(f, src)

    found = []
    for comp, cycles, edges in comps:
        rings = [list(c) + [c[0]] for c in cycles]
        names = [f"{label}: " + " -> ".join(mod(f) for f in r) for r in rings]
        found.extend(names)
        new = [(r, n) for r, n in zip(rings, names) if n not in known]
        if len(new) > 1:
            print(
                f"{len(new)} import circles among {len(comp)} modules of {label}: "
                + ", ".join(mod(f) for f in comp),
                file=sys.stderr,
            )
        for ring, _ in new:
            print(
                f"import circle in {label}: " + " -> ".join(mod(f) for f in ring),
                file=sys.stderr,
            )
            for a, b in zip(ring, ring[1:]):
                line, shown, source = edges[(a, b)]
                text = source.line_texts[line - 1].strip()
                print(f"  {mod(a)} -> {mod(b)} by {shown}", file=sys.stderr)
                print(f"    {os.path.relpath(a, shown_from)}:{line}: {text}", file=sys.stderr)
    return found


def read_known(path):
    """The circles listed in `path` (one a line, `#` comments), as a set."""
    with open(path, encoding="utf-8") as f:
        lines = (line.split("#", 1)[0].strip() for line in f)
        return {line for line in lines if line}


# The self-test's crate: file -> text. Circles: a/b (`use`, an alias), c/d (paths in a
# signature and a generic argument of a field), p/x, p/y, p/z (three modules, a bare module
# import used as `z::make`), m/mod.rs and m/leaf.rs (a parent and child naming each other's
# items), inline_host/w (from an inline module through `super::super::`). No circle: q and
# its child (the child names q only in comments and literals), k's children (a re-export of
# the parent), e/f and g/h (only test code names the other), other crates' paths.
SELF_TEST_CRATE = {
    "lib.rs": """//! The self-test's crate. `use crate::b::B` in a doc comment names nothing.
pub use other_crate::{ext, more};

pub mod a;
pub mod b;
pub mod c;
pub mod d;
pub mod e;
pub mod f;
pub mod g;
pub mod h;
pub mod inline_host;
pub mod k;
pub mod m;
pub mod p;
pub mod q;
pub mod w;
""",
    "main.rs": "use self_test::a::A;\n\nfn main() {\n    let _ = self_test::k::run();\n}\n",
    "a.rs": "use crate::b::B;\n\npub struct A(pub B);\n\npub fn ext() -> crate::ext::Thing {\n"
    "    crate::more::make()\n}\n",
    "b.rs": "use super::a::{self as first};\n\npub struct B;\n\npub fn make() -> first::A {\n"
    "    first::A(B)\n}\n",
    "c.rs": "pub struct C;\n\npub fn take(x: super::d::D) -> usize {\n    x.c.len()\n}\n",
    "d.rs": "pub struct D {\n    pub c: Vec<crate::c::C>,\n}\n",
    "e.rs": """pub struct E;

#[cfg(test)]
use crate::f::F;

#[cfg(test)]
fn helper() -> crate::f::F {
    F(E)
}

#[cfg(all(test, feature = "slow"))]
impl<T, U> From<(T, U)> for crate::f::F {
    fn from(_: (T, U)) -> Self { crate::f::F(E) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::f::F;

    #[test]
    fn helps() {
        let _ = helper();
    }
}
""",
    "f.rs": "pub struct F(pub crate::e::E);\n\npub fn core() -> neardup_core::index::Index {\n"
    "    ::neardup_core::index::Index::new()\n}\n",
    "g/mod.rs": "pub struct G;\n\n#[cfg(test)]\nmod tests;\n",
    "g/tests.rs": "use super::*;\nuse crate::h::H;\n\n#[test]\nfn g() {\n    let _ = (G, H);\n}\n",
    "h.rs": "pub struct H;\n\npub fn h() -> crate::g::G {\n    crate::g::G\n}\n",
    "inline_host.rs": """pub mod inner {
    pub fn f() -> super::super::w::W {
        super::super::w::W
    }
}
""",
    "w.rs": "pub struct W;\n\npub fn w() {\n    let _ = crate::inline_host::inner::f();\n}\n",
    "k/mod.rs": "mod a;\nmod b;\n\npub use a::Thing;\n\npub fn run() {\n    b::go();\n}\n",
    "k/a.rs": "pub struct Thing;\n",
    "k/b.rs": "use super::Thing;\n\npub fn go() {\n    let _ = Thing;\n}\n",
    "m/mod.rs": "mod leaf;\n\npub struct Top;\n\npub fn f() -> leaf::L {\n    leaf::L(Top)\n}\n",
    "m/leaf.rs": "pub struct L(pub super::Top);\n",
    "p/mod.rs": "mod x;\nmod y;\nmod z;\n",
    "p/x.rs": """pub struct X;

impl X {
    pub fn y(&self) -> super::y::Y {
        super::y::Y
    }
}
""",
    "p/y.rs": "use super::z;\n\npub struct Y;\n\npub fn go() {\n    z::make();\n}\n",
    "p/z.rs": "use crate::p::x::X as Ex;\n\npub fn make() -> Ex {\n    Ex\n}\n",
    "q.rs": "mod child;\n\npub struct Q;\n\npub fn f() -> child::X {\n    child::X\n}\n",
    "q/child.rs": """// super::Q is only in this comment
pub struct X;
pub const NOTE: &str = "super::Q and crate::q::Q in a string { ";
pub const RAW: &str = r#"crate::q::Q " } "#;
pub const BRACE: char = '{';
pub const QUOTE: char = '\\'';
/* a /* nested */ super::Q */
/// [`super::Q`]
pub fn id<'a>(s: &'a str) -> &'a str {
    s
}
""",
}

SELF_TEST_CIRCLES = [
    ("a.rs", "b.rs"),
    ("c.rs", "d.rs"),
    ("inline_host.rs", "w.rs"),
    ("m/leaf.rs", "m/mod.rs"),
    ("p/x.rs", "p/y.rs", "p/z.rs"),
]

SELF_TEST_LINES = {
    ("c.rs", "d.rs"): (3, "super::d::D"),
    ("d.rs", "c.rs"): (2, "crate::c::C"),
    ("b.rs", "a.rs"): (1, "super::a"),
    ("p/y.rs", "p/z.rs"): (1, "super::z"),
    ("p/z.rs", "p/x.rs"): (1, "crate::p::x::X"),
}


def self_test():
    """Checks the checker on SELF_TEST_CRATE; returns the exit status."""
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "src")
        for name, text in SELF_TEST_CRATE.items():
            path = os.path.join(src, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        comps, warnings = check(src)
        crate = Crate(os.path.join(src, "lib.rs"))

        def rel(f):
            return os.path.relpath(f, src).replace(os.sep, "/")

        found = sorted(tuple(rel(f) for f in c) for _, cs, _ in comps for c in cs)
        imports = {(rel(a), rel(b)): (v[0], v[1]) for (a, b), v in crate.imports().items()}
        problems = []
        if warnings:
            problems.append(f"warnings: {warnings}")
        if found != SELF_TEST_CIRCLES:
            problems.append(f"circles {found}, expected {SELF_TEST_CIRCLES}")
        for key, want in SELF_TEST_LINES.items():
            if imports.get(key) != want:
                problems.append(f"import {key}: {imports.get(key)}, expected {want}")
        for a, b in (("q.rs", "q/child.rs"), ("k/mod.rs", "k/a.rs"), ("k/b.rs", "k/a.rs")):
            if (a, b) not in imports:
                problems.append(f"no import {a} -> {b}")
        for a, b in (("q/child.rs", "q.rs"), ("k/b.rs", "k/mod.rs"), ("e.rs", "f.rs"),
                     ("g/mod.rs", "h.rs"), ("g/tests.rs", "h.rs"), ("lib.rs", "a.rs")):
            if (a, b) in imports:
                problems.append(f"import {a} -> {b} found, expected none")
        out = io.StringIO()
        with contextlib.redirect_stderr(out):
            shown = len(report(src, "src", tmp))
        for c in SELF_TEST_CIRCLES:
            ring = " -> ".join(c + c[:1])
            if f"import circle in src: {ring}\n" not in out.getvalue():
                problems.append(f"the report does not show {ring}")
        if shown != len(SELF_TEST_CIRCLES) or "src/d.rs:2: pub c: Vec<crate::c::C>," not in out.getvalue():
            problems.append(f"the report:\n{out.getvalue()}")
    for p in problems:
        print(f"self-test: {p}", file=sys.stderr)
    if problems:
        return 1
    print(f"self-test passed: {len(SELF_TEST_CIRCLES)} circles found, as expected")
    return 0


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    parser = argparse.ArgumentParser(
        description="Fails when modules of a crate import each other (see the script's docstring)."
    )
    parser.add_argument("src", nargs="*", metavar="SRC_DIR", help="a crate's src/ directory")
    parser.add_argument("--self-test", action="store_true",
                        help="check the checker on a small crate tree of its own")
    parser.add_argument("--known", metavar="FILE",
                        help="circles that stand and are to be broken, one a line as the report "
                             "names them (default, without SRC_DIR: scripts/module-circles.known); "
                             "a circle not listed fails, and so does a listed one that is gone")
    args = parser.parse_args()
    if args.self_test:
        if args.src:
            parser.error("--self-test takes no SRC_DIR")
        sys.exit(self_test())
    srcs = args.src or [
        os.path.join(root, "src"),
        os.path.join(root, "crates", "neardup-core", "src"),
        os.path.join(root, "crates", "neardup-lab", "src"),
    ]
    for src in srcs:
        if not crate_roots(src):
            parser.error(f"{src}: no crate root (lib.rs, main.rs or bin/*.rs)")
    known_path = args.known or (None if args.src else os.path.join(here, "module-circles.known"))
    known = read_known(known_path) if known_path else set()
    found = []
    for src in srcs:
        # paths as from the repository's root, or from here for a crate elsewhere
        inside = os.path.abspath(src).startswith(root + os.sep)
        shown_from = root if inside else os.getcwd()
        found += report(src, os.path.relpath(src, shown_from), shown_from, known)
    new = [c for c in found if c not in known]
    gone = sorted(known - set(found))
    for c in gone:
        print(f"no longer a circle: {c} (take it out of {known_path})", file=sys.stderr)
    if new:
        print(f"{len(new)} import circle(s) between the modules of {len(srcs)} crate(s)"
              + (f", not among the {len(known)} of {known_path}" if known else ""),
              file=sys.stderr)
    if new or gone:
        sys.exit(1)
    if known:
        print(f"no import circle between the modules of {len(srcs)} crate(s) but the "
              f"{len(known)} listed in {os.path.relpath(known_path)}, which remain to be broken")
    else:
        print(f"no import circle between the modules of {len(srcs)} crate(s)")


if __name__ == "__main__":
    main()
