"""The floors of folio's rooms, from their imports. A room is a module of folio/, or a whole
subpackage (`store/`, `lexical/`: the rest of the code reaches them through their one door). A
room stands one floor above the highest room it imports (every `import folio...` and `from
folio... import`, at the top of the file or inside a function), so floor 1 holds the rooms that
import nothing of folio's. Where rooms import each other in a loop (a circle), the import made
inside a function is the one taken to run back up; where both are, the room that imports more
from the rest stands higher. DEVELOPERS.md says how a route through the code is followed with
these floors and what counts as a climb.

    python bench/floors.py                          # every module, highest floor first
    python bench/floors.py --route pipeline,session,pipeline,batch
                                                    # a route's moves, and how many climb back up

A route names rooms as this script prints them: a module without `.py` (`pipeline`), a
subpackage with its slash (`store/`).
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "folio"


def room_of(path: Path) -> str:
    """`pipeline` for folio/pipeline.py, `store/` for anything under folio/store/."""
    rel = path.relative_to(PACKAGE).with_suffix("")
    return rel.parts[0] + "/" if len(rel.parts) > 1 else rel.parts[0]


def imports_of(path: Path, rooms: set[str]) -> dict[str, bool]:
    """The rooms one file imports: each with whether any of its imports stands at the file's top
    level (False: only inside functions)."""
    out: dict[str, bool] = {}
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    top = {id(n) for n in tree.body}
    pkg = path.relative_to(PACKAGE).parts[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:  # relative: from .core import x inside folio/store/
                mod = ".".join(["folio", *pkg[: len(pkg) - node.level + 1], *([mod] if mod else [])])
            names = [f"{mod}.{a.name}" for a in node.names]
        else:
            continue
        for n in names:
            parts = n.split(".")
            if parts[0] != "folio" or len(parts) < 2:
                continue
            room = parts[1] + "/" if parts[1] + "/" in rooms else parts[1]
            if room in rooms:
                out[room] = out.get(room, False) or id(node) in top
    out.pop(room_of(path), None)
    return out


def graph() -> dict[str, dict[str, bool]]:
    files = sorted(PACKAGE.rglob("*.py"))
    rooms = {room_of(p) for p in files}
    g: dict[str, dict[str, bool]] = {r: {} for r in rooms}
    for p in files:
        for room, at_top in imports_of(p, rooms).items():
            g[room_of(p)][room] = g[room_of(p)].get(room, False) or at_top
    return g


def circles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components (Tarjan, iterative), each after every component it reaches."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    for root in sorted(g):
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        work = [(root, iter(sorted(g[root])))]
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while not comp or comp[-1] != v:
                        comp.append(stack.pop())
                        on.discard(comp[-1])
                    out.append(sorted(comp))
    return out


def floors(g: dict[str, dict[str, bool]]) -> tuple[dict[str, int], list[list[str]]]:
    """Each room's floor, and the circles."""
    floor: dict[str, int] = {}
    loops = []
    for comp in circles({r: set(d) for r, d in g.items()}):
        if len(comp) > 1:
            loops.append(comp)
        inside = set(comp)
        # an import made inside a function is the one that runs back up; then the room importing
        # more from the rest stands higher
        order = sorted(comp, key=lambda r: (sum(g[r][w] for w in inside if w in g[r]),
                                            len(set(g[r]) - inside), r))
        for r in order:
            below = [w for w in g[r] if w in floor]
            floor[r] = 1 + max((floor[w] for w in below), default=0)
    return floor, loops


def climbs(route: list[str], floor: dict[str, int]) -> int:
    n = 0
    for a, b in zip(route[:-1], route[1:], strict=True):
        up = floor[b] - floor[a]
        print(f"  {a} (floor {floor[a]}) -> {b} (floor {floor[b]})" + (f"   UP {up}" if up > 0 else ""))
        n += up > 0
    return n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--route", help="modules a value passes through, in order, comma-separated")
    args = ap.parse_args(argv)
    g = graph()
    floor, loops = floors(g)
    if args.route:
        route = [m.strip().removesuffix(".py") for m in args.route.split(",")]
        route = [m if m in floor or m + "/" not in floor else m + "/" for m in route]
        unknown = [m for m in route if m not in floor]
        if unknown:
            print(f"floors.py: folio has no room {unknown[0]!r}; name a module without .py "
                  "(pipeline) or a subpackage with its slash (store/)", file=sys.stderr)
            return 2
        print(f"{climbs(route, floor)} climbs back up over {len(route) - 1} moves")
        return 0
    for m in sorted(floor, key=lambda m: (-floor[m], m)):
        print(f"{floor[m]:3}  {m}")
    for c in loops:
        print("circle: " + " <-> ".join(c))
    return 0


if __name__ == "__main__":
    sys.exit(main())
