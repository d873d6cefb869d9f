"""The labeled question sets for ranking evaluation: one loader, the tune/held split, target checks.

Every set is a YAML file of questions, each with its corpus and its target sections, split once
into a `tune` and a `held` half (issue 28: a ranking choice is made on `tune` and must also hold on
`held`; the held half is never looked at to tune). Sets:

| set | file | targets |
|---|---|---|
| rust-book-sections | bench/labels/rust_book_sections.yaml | path + heading, grades |
| eips-sections | bench/labels/eips_sections.yaml | path + heading, grades |
| keps-sections | bench/labels/keps_sections.yaml | path + heading, grades |
| identifiers | bench/labels/identifiers.yaml | the section that defines the identifier |
| rust-book-natural | bench/labels/rust_book_natural.yaml | path + heading |
| eips-natural | bench/labels/eips_natural.yaml | whole files |
| rust-book-paraphrase | tests/quality/rust_book.yaml | path + heading |
| drawn | bench/hybrid_questions.yaml | path + line range (rust-book, eips, keps) |
| rust-book-blind | bench/labels/rust_book_blind.yaml | path + heading (all `held`: never tuned on) |
| eips-blind | bench/labels/eips_blind.yaml | path + heading (all `held`: never tuned on) |

A target is one of: `heading` (the heading's source text, or the end of its trail joined by " > "
when the text repeats in the file), resolved to the section's line range by folio's own sectioner
at load time; `start`/`end` (a line range, the drawn set); neither (the whole file). Grades: the
target and its `alternates` are the answer (2); `useful` sections help (1).

Halves: the new files carry `half` on every question. The older files are not edited (two of them
say so); their halves are in bench/labels/splits.yaml. Both were drawn once by `split`: questions
sorted by the sha256 of their text (within each `shape` for the identifier set), then alternately
tune, held. Committed, never re-drawn; `check` fails on a question without a half.

    python bench/labelsets.py check                       # every target resolves; counts per half
    python bench/labelsets.py split [SET ...]             # draw the halves of a set that has none
"""

from __future__ import annotations

import hashlib
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
LABELS = REPO / "bench" / "labels"
SPLITS = LABELS / "splits.yaml"
SETS = {
    "rust-book-sections": LABELS / "rust_book_sections.yaml",
    "eips-sections": LABELS / "eips_sections.yaml",
    "keps-sections": LABELS / "keps_sections.yaml",
    "identifiers": LABELS / "identifiers.yaml",
    "rust-book-natural": LABELS / "rust_book_natural.yaml",
    "eips-natural": LABELS / "eips_natural.yaml",
    "rust-book-paraphrase": REPO / "tests" / "quality" / "rust_book.yaml",
    "drawn": REPO / "bench" / "hybrid_questions.yaml",
    "rust-book-blind": LABELS / "rust_book_blind.yaml",
    "eips-blind": LABELS / "eips_blind.yaml",
}
HALVES = ("tune", "held")
# Files written before issue 28 (their headers say never edit): halves live in splits.yaml.
EDITED_ELSEWHERE = ("rust-book-natural", "eips-natural", "rust-book-paraphrase", "drawn")
WHOLE_FILE = 10**9


@dataclass(frozen=True)
class Target:
    path: str
    start: int
    end: int
    grade: int  # 2 the answer, 1 useful
    label: str  # what the file said, for messages


@dataclass(frozen=True)
class Question:
    set: str
    q: str
    corpus: str
    half: str
    targets: tuple[Target, ...]
    shape: str = ""


class LabelError(Exception):
    pass


def _sections(root: Path, path: str, cache: dict):
    from folio import sections

    if path not in cache:
        f = root / path
        if not f.is_file():
            raise LabelError(f"{path}: no such file under {root}")
        text, _ = sections.decode(f.read_bytes())
        cache[path] = sections.split_sections(text)
    return cache[path]


def resolve(root: Path, t: dict, grade: int, cache: dict) -> Target:
    """One target of a question as a line range in the file as it is now."""
    path = t["path"]
    if "start" in t:
        return Target(path, int(t["start"]), int(t["end"]), grade, f"{path}:{t['start']}-{t['end']}")
    secs = _sections(root, path, cache)
    heading = t.get("heading")
    if heading is None:
        return Target(path, 1, WHOLE_FILE, grade, path)
    want = tuple(heading.split(" > "))
    found = [s for s in secs if s.level > 0 and s.trail[-len(want):] == want]
    if len(found) != 1:
        trails = [" > ".join(s.trail) for s in secs if s.level > 0 and s.heading == want[-1]]
        why = "no section" if not found else f"{len(found)} sections ({'; '.join(trails)})"
        raise LabelError(f"{path}: heading {heading!r} names {why}; give more of its trail")
    s = found[0]
    return Target(path, s.start, s.end, grade, f"{path} > {heading}")


def _halves() -> dict:
    return yaml.safe_load(SPLITS.read_text(encoding="utf-8")) if SPLITS.is_file() else {}


def load(name: str, roots: dict[str, Path], need_half: bool = True) -> list[Question]:
    """The questions of set `name`, targets resolved against roots[corpus]; a corpus missing from
    `roots` leaves its questions out (a set spanning several corpora, measured on some of them)."""
    data = yaml.safe_load(SETS[name].read_text(encoding="utf-8"))
    recorded = _halves().get(name, {})
    by_text = {q: h for h in HALVES for q in recorded.get(h, ())}
    caches: dict[str, dict] = {}
    out = []
    for i, q in enumerate(data["questions"], 1):
        corpus = q.get("corpus") or data.get("corpus") or "rust-book"
        if corpus not in roots:
            continue
        half = q.get("half") or by_text.get(q["q"])
        if half not in HALVES and need_half:
            raise LabelError(f"{SETS[name].name}: question {i} ({q['q']!r}) has no half: run `split` once")
        cache = caches.setdefault(corpus, {})
        root = roots[corpus]
        try:
            ts = [resolve(root, q, 2, cache)]
            ts += [resolve(root, a, 2, cache) for a in q.get("alternates", ())]
            ts += [resolve(root, a, int(a.get("grade", 1)), cache) for a in q.get("useful", ())]
        except LabelError as e:
            raise LabelError(f"{SETS[name].name}: question {i} ({q['q']!r}): {e}") from None
        out.append(Question(name, q["q"], corpus, half, tuple(ts), q.get("shape", "")))
    return out


def draw_halves(questions: list[dict]) -> dict[str, str]:
    """text -> half: sorted by sha256 of the text within each shape (else each corpus), alternately
    tune and held."""
    groups: dict[str, list[str]] = {}
    for q in questions:
        groups.setdefault(q.get("shape") or q.get("corpus") or "", []).append(q["q"])
    out = {}
    for texts in groups.values():
        for i, t in enumerate(sorted(texts, key=lambda t: hashlib.sha256(t.encode()).hexdigest())):
            out[t] = HALVES[i % 2]
    return out


def split_file(path: Path) -> int:
    """Write `half: ...` under every `- q:` line that lacks one (comments and layout kept)."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    todo = [q for q in data["questions"] if "half" not in q]
    if not todo:
        return 0
    halves = draw_halves(data["questions"] if len(todo) == len(data["questions"]) else todo)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    out = []
    for line in lines:
        out.append(line)
        m = re.match(r"^(\s*)- q: (.*)$", line)
        if m:
            text = yaml.safe_load(m.group(2))
            if text in halves:
                out.append(f"{m.group(1)}  half: {halves[text]}\n")
    path.write_text("".join(out), encoding="utf-8")
    return len(todo)


def split_recorded(name: str) -> int:
    """Draw the halves of a set whose file is not ours to edit into bench/labels/splits.yaml."""
    recorded = _halves()
    if name in recorded:
        return 0
    data = yaml.safe_load(SETS[name].read_text(encoding="utf-8"))
    halves = draw_halves(data["questions"])
    recorded[name] = {h: [t for t, x in halves.items() if x == h] for h in HALVES}
    head = ("# Halves of the labeled sets whose files are not edited here (see bench/labelsets.py), drawn once\n"
            "# by `python bench/labelsets.py split` and committed: never re-drawn. The held half must not be\n"
            "# looked at to tune.\n")
    SPLITS.write_text(head + yaml.safe_dump(recorded, allow_unicode=True, sort_keys=False, width=200),
                      encoding="utf-8")
    return len(halves)


def default_roots(base: Path) -> dict[str, Path]:
    return {c: base / c for c in ("rust-book", "eips", "keps")}


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=("check", "split"))
    ap.add_argument("sets", nargs="*", help="set names (split); default every set")
    ap.add_argument("--corpora", type=Path, default=Path("/tmp/folio-bench"),
                    help="directory holding rust-book/, eips/, keps/ (default /tmp/folio-bench)")
    a = ap.parse_args()
    if a.command == "split":
        for name in a.sets or SETS:
            path = SETS[name]
            n = split_file(path) if path.parent == LABELS and name not in EDITED_ELSEWHERE else split_recorded(name)
            print(f"{name}: {n} questions given a half")
        return
    roots = default_roots(a.corpora)
    bad = 0
    for name in SETS:
        if not SETS[name].is_file():
            print(f"{name}: {SETS[name]} not written yet")
            continue
        try:
            qs = load(name, roots, need_half=False)
        except LabelError as e:
            print(f"{name}: {e}")
            bad += 1
            continue
        dup = len(qs) - len({q.q for q in qs})
        counts = {h: sum(q.half == h for q in qs) for h in (*HALVES, None)}
        bad += counts[None] > 0
        print(f"{name:22} {len(qs):4} questions: tune {counts['tune']}, held {counts['held']}"
              + (f", NO HALF {counts[None]}" if counts[None] else "")
              + (f"; {dup} duplicate texts" if dup else ""))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
