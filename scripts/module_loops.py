#!/usr/bin/env python3
"""Import loops between the modules (files) of each crate under crates/.

An edge A -> B means code in file A names an item that file B defines: through `use`, or a path
(`crate::..`, `super::..`, `self::..`, a child module, or an imported module's name). Re-exports
(`pub use`) are followed to the file that defines the item, so a facade module that only
re-exports is not an edge. Inline `#[cfg(test)] mod tests { .. }` blocks and `tests.rs` files
are left out (tests may reach anywhere). Prints each strongly connected set of two or more
files, per crate; `--count` prints only the totals; exits 1 when any loop exists and `--check`
is given.

Usage: scripts/module_loops.py [--check] [--count] [CRATE_DIR ...]   (default: every crate)
"""

import re
import sys
from pathlib import Path

ITEM = re.compile(
    r"^\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?(?:unsafe\s+)?(?:async\s+)?(?:const\s+)?"
    r"(?:extern\s+\"C\"\s+)?(fn|struct|enum|trait|type|const|static|union|mod)\s+(\w+)",
    re.M,
)
MACRO = re.compile(r"^\s*macro_rules!\s*(\w+)", re.M)
USE = re.compile(r"^\s*(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", re.M)
PATH = re.compile(r"\b((?:crate|super|self)(?:::\w+)+)")


def strip(text):
    """Comments, strings and char literals removed (one left-to-right pass), then the inline
    test module."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif c == "r" and re.match(r'r#*"', text[i:]) and not (i and (text[i - 1].isalnum() or text[i - 1] == "_")):
            hashes = re.match(r"r(#*)", text[i:]).group(1)
            j = text.find('"' + hashes, i + 2 + len(hashes))
            out.append('""')
            i = n if j < 0 else j + 1 + len(hashes)
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""')
            i = j + 1
        elif c == "'":
            m = re.match(r"'(?:\\.[^']*|[^\\'])'", text[i:])
            if m:
                out.append("' '")
                i += m.end()
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    text = "".join(out)
    m = re.search(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*mod\s+\w+\s*\{", text)
    if m:
        text = text[: m.start()]
    return text


def expand_use(tree):
    """`a::{b, c::{d, e as f}}` -> [(path, alias)]."""
    tree = re.sub(r"\s+", "", tree)
    out = []

    def walk(prefix, s):
        depth, start, parts = 0, 0, []
        for i, ch in enumerate(s):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append(s[start:i])
                start = i + 1
        parts.append(s[start:])
        for part in parts:
            if not part:
                continue
            if "{" in part:
                head, rest = part.split("{", 1)
                walk(prefix + [x for x in head.split("::") if x], rest[:-1])
            else:
                alias = None
                if "as" in part and re.search(r"\bas\b", part.replace("::", " ")):
                    part, alias = re.split(r"as(?=\w+$)", part, maxsplit=1)
                segs = prefix + [x for x in part.split("::") if x]
                if segs and segs[-1] == "self":
                    segs = segs[:-1]
                if segs:
                    out.append((segs, alias or segs[-1]))

    walk([], tree)
    return out


class Crate:
    def __init__(self, src):
        self.src = src
        self.files = {}  # module path tuple -> file
        for f in sorted(src.rglob("*.rs")):
            rel = f.relative_to(src).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] in ("lib", "main") and len(parts) == 1:
                parts = []
            elif parts[-1] == "mod":
                parts = parts[:-1]
            if "tests" in parts or (parts and parts[-1] == "tests"):
                continue
            if "bin" in parts[:1]:
                continue
            self.files[tuple(parts)] = f
        self.text = {m: strip(f.read_text()) for m, f in self.files.items()}
        self.items = {m: set(n for _, n in ITEM.findall(t)) | set(MACRO.findall(t))
                      for m, t in self.text.items()}
        self.uses = {m: [(u, bool(pub)) for pub, tree in USE.findall(t) for u in expand_use(tree)]
                     for m, t in self.text.items()}

    def absolute(self, mod, segs):
        """A path as written in `mod` -> absolute segments, or None for other crates."""
        segs = list(segs)
        if segs[0] == "crate":
            return segs[1:]
        base = list(mod)
        if segs[0] == "self":
            return base + segs[1:]
        if segs[0] == "super":
            while segs and segs[0] == "super":
                base = base[:-1]
                segs = segs[1:]
            return base + segs
        if tuple(base + [segs[0]]) in self.files:  # a child module
            return base + segs
        if tuple([segs[0]]) in self.files and not base:
            return segs
        return None

    def resolve(self, segs, seen=None):
        """Absolute segments -> the module that defines the last one (following re-exports)."""
        seen = seen or set()
        key = tuple(segs)
        if key in seen:
            return None
        seen.add(key)
        mod = []
        for i, seg in enumerate(segs):
            if tuple(mod + [seg]) in self.files:
                mod.append(seg)
                continue
            if tuple(mod) not in self.files:
                return None
            if seg in self.items[tuple(mod)]:
                return tuple(mod)
            for (path, alias), _pub in self.uses[tuple(mod)]:
                if alias == seg:
                    target = self.absolute(tuple(mod), path)
                    if target is None:
                        return None
                    return self.resolve(target + segs[i + 1:], seen)
            return tuple(mod)
        return tuple(mod)

    def edges(self):
        edges = {m: set() for m in self.files}
        for mod, text in self.text.items():
            refs = []
            aliases = {}
            for (path, alias), pub in self.uses[mod]:
                target = self.absolute(mod, path)
                if target is None:
                    continue
                if not pub:
                    refs.append(target)
                if tuple(target) in self.files:
                    aliases[alias] = target
            # Paths inside re-exports were followed above; they are not edges of this file.
            text = USE.sub(lambda u: "" if u.group(1) else u.group(0), text)
            for m in PATH.finditer(text):
                segs = m.group(1).split("::")
                target = self.absolute(mod, segs)
                if target is not None:
                    refs.append(target)
            names = set(aliases) | {c[-1] for c in self.files if c[:-1] == mod and c}
            for name in names:
                for m in re.finditer(r"(?<![:\w])" + re.escape(name) + r"((?:::\w+)+)", text):
                    base = aliases.get(name, list(mod) + [name])
                    refs.append(list(base) + m.group(1).split("::")[1:])
            for target in refs:
                owner = self.resolve(target)
                if owner is not None and owner != mod:
                    edges[mod].add(owner)
        return edges


def loops(edges):
    """Strongly connected sets of two or more nodes (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in edges:
        if v not in index:
            visit(v)
    return out


def main(argv):
    check = "--check" in argv
    count = "--count" in argv
    dirs = [a for a in argv if not a.startswith("--")]
    root = Path(__file__).resolve().parent.parent
    crates = [Path(d) for d in dirs] or sorted(p.parent for p in root.glob("crates/*/src"))
    total = 0
    for crate in crates:
        c = Crate(crate / "src")
        found = loops(c.edges())
        for comp in found:
            total += 1
            if not count:
                names = ", ".join("/".join(m) or "lib" for m in comp)
                print(f"{crate.name}: {len(comp)} files: {names}")
    print(f"{total} import loops")
    return 1 if check and total else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
