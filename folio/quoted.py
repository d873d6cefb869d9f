"""Whether a question quotes a record: how many of its adjacent word pairs the record's lines hold in order.

A question in the corpus's own words (a sentence remembered, an error message pasted, a phrase
copied from a page) keeps their order; BM25F counts words, not their order, so a record that only
shares the words scores almost alike, and a lexical #1 a few percent ahead of its #2 is not
decisive by separation (evidence.py). Read in order, the record it came from holds most of the
question's pairs of adjacent words (stopwords dropped on both sides, as the lexical plane analyses
them) and the next one few. On the labeled sets' "drawn" questions (sentences from the corpus)
that tells the right record where separation cannot, and ordinary questions rarely hold three
pairs of any record in order (docs/ranking.md, "A question that quotes the corpus").

Owns reading the lines of the few records the evidence asks about (walk.read_bytes: one read per
file, as the freshness check reads the files behind the rows) and counting pairs in them. A file
that cannot be read, or has changed so its lines no longer hold the record, only counts fewer
pairs: the query's refresh re-ranks a changed file's rows. Must not rank, fuse or print.
"""

from __future__ import annotations

MIN_PAIRS = 3  # a quote holds at least this many of the question's word pairs in order


def pairs(terms: list[str]) -> set[tuple[str, str]]:
    """The distinct pairs of adjacent analysed terms of a text, in order."""
    return set(zip(terms, terms[1:], strict=False))  # one pair fewer than terms


def held(stores: list, picks: list[tuple[int, int]], wanted: set) -> list[int]:
    """For each (corpus, slot) in `picks`, how many of the `wanted` pairs its record's lines hold."""
    from folio.lexical.analysis import analyze
    from folio.sections import decode
    from folio.walk import read_bytes

    rows = {c: stores[c].records([s for k, s in picks if k == c]) for c in {c for c, _s in picks}}
    files = {c: stores[c].files({r.file_id for r in rs.values()}) for c, rs in rows.items()}
    lines: dict[tuple[int, str], list[str] | None] = {}  # one read per file
    out = []
    for c, slot in picks:
        row = rows[c].get(slot)
        f = files[c].get(row.file_id) if row is not None else None
        if f is None:
            out.append(0)
            continue
        key = (c, f["path"])
        if key not in lines:
            try:
                lines[key] = decode(read_bytes(stores[c].root, f["path"]))[0].split("\n")
            except OSError:
                lines[key] = None
        text = lines[key]
        out.append(0 if text is None else len(wanted & pairs(analyze("\n".join(text[row.start - 1:row.end])))))
    return out
