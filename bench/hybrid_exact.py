"""Whether the windowed hybrid path (folio/window.py) prints exactly what the full path prints.

Runs every question twice in one process, once with the windows (FOLIO_WINDOW_MIN=0) and once
with the full path (fusion.fuse, feedback.hybrid over every record), and compares every row:
path, lines, pieces, slots, score (bit for bit, not only at 6 decimals), component ranks, trail,
and the answer's mode and feedback flag. Questions: headings of the corpus (as bench/run_all.py's
query_texts takes them), identifier-like words from the headings (the identifier weights), at
--limit 5, 10 and 50, feedback auto and off, one --where filter, and a few at --limit 2000 (past
the windows: the fallback). Reports the differences (zero is the bar) and how often the windows
decided the rows themselves.

    .venv/bin/python bench/hybrid_exact.py /tmp/folio-bench/scale/2m --questions 200
    .venv/bin/python bench/hybrid_exact.py ROOT_A ROOT_B --size 50   # two corpora together, small windows

--size sets the windows and feedback's pool (FOLIO_WINDOW_SIZE, FOLIO_FEEDBACK_POOL) for both
paths, so a small corpus exercises the windows and their guards. Read only: never writes an index.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

ON, OFF = "0", "1000000000"  # FOLIO_WINDOW_MIN: windows at any size / never


def identifier_words(texts: list[str], n: int) -> list[str]:
    from folio.lexical.analysis import identifier_share

    words = dict.fromkeys(w.strip("()[]{},.:;`'\"") for t in texts for w in t.split())
    picked = [w for w in words if len(w) > 3 and identifier_share(w) > 0]
    return picked[:n]


def main() -> int:
    from run_all import commonest_pair, query_texts

    from folio import config, search, window
    from folio import search as search_mod

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("roots", nargs="+", type=Path)
    ap.add_argument("--questions", type=int, default=200)
    ap.add_argument("--size", type=int, default=0, help="window and feedback pool size for both paths")
    a = ap.parse_args()
    roots = [r.resolve() for r in a.roots]
    if a.size:
        os.environ["FOLIO_WINDOW_SIZE"] = os.environ["FOLIO_FEEDBACK_POOL"] = str(a.size)
    heads = query_texts(roots[0], a.questions)
    many = heads + [f"{w}" for w in identifier_words(heads * 1, 30)] + [f"how {w} works" for w in
                                                                       identifier_words(heads, 10)]
    pair = commonest_pair(roots[0])

    used = {"windowed": 0, "feedback": 0, "rows": 0}
    real_rank, real_select = window.rank, search_mod.select

    def counted_rank(*args, **kw):
        try:
            out = real_rank(*args, **kw)
        except window.Inexact:
            used["feedback"] += 1
            raise
        used["windowed"] += 1
        return out

    def counted_select(*args, **kw):
        try:
            return real_select(*args, **kw)
        except window.Inexact:
            used["rows"] += 1
            raise

    window.rank, search_mod.select = counted_rank, counted_select

    def rows(session, req):
        ans = session.query(req)
        return (ans.mode, ans.feedback, tuple(ans.notices),
                [dataclasses.astuple(dataclasses.replace(h, frontmatter=None)) for h in ans.hits])

    cases = [(q, 5, ()) for q in many] + [(q, 10, ()) for q in heads[::2]] + [(q, 50, ()) for q in heads[::4]]
    cases += [(q, 2000, ()) for q in heads[:3]]
    if pair:
        cases += [(q, 10, (f"{pair[0]}={pair[1]}",)) for q in heads[::10]]
    total = diffs = 0
    for fb in ("auto", "off"):
        os.environ["FOLIO_FEEDBACK"] = fb
        settings = config.resolve(roots[0])
        with search.Session(roots, settings) as session:
            for q, limit, where in cases:
                req = search.Request(q, limit=limit, refresh=False, mode="hybrid", where=where)
                os.environ["FOLIO_WINDOW_MIN"] = OFF
                full = rows(session, req)
                os.environ["FOLIO_WINDOW_MIN"] = ON
                got = rows(session, req)
                total += 1
                if total % 50 == 0:
                    print(f"  ({total} questions, {diffs} different so far)", file=sys.stderr, flush=True)
                if got != full:
                    diffs += 1
                    print(f"DIFFERENT (feedback {fb}, --limit {limit}, where {where}): {q!r}")
                    for x, y in zip(full[3], got[3], strict=False):
                        if x != y:
                            print(f"  full     {x}\n  windowed {y}")
                            break
    print(f"{' + '.join(map(str, roots))}: {total} questions, {diffs} different; the windows decided "
          f"{used['windowed'] - used['rows']} of them; the full path ranked {used['feedback']} (feedback's best "
          f"records undecided) and {used['rows']} (rows past the windows)")
    return 1 if diffs else 0


if __name__ == "__main__":
    raise SystemExit(main())
