"""What the embedded text of a record could be, measured on rust-book with the real MiniLM server.

The quality smoke (tests/quality/rust_book.yaml: 16 hand-written paraphrase questions, at least
80% of targets in the top 3) does not pass with all-MiniLM-L6-v2. This script asks whether a
different representation of a record would change that, outside folio's index so that each
variant costs only its embedding requests (cached in /tmp/folio-bench/quality/vectors.pkl, keyed
by the exact text, so re-runs are cheap):

- budget: records cut at 1000 or 600 characters (MiniLM was trained on at most 256 tokens);
- text: `reader` (the record as a reader sees it, folio/reader.py: what folio embeds), `own`
  (the record's source lines, what folio embedded before reader-1), `trail` (document title and
  heading trail on a first line, then the lines: a "contextual header"), `nocode` (own lines
  without fenced code);
- `+head w`: rank by record score plus w times the cosine of the section's heading trail alone.

Each variant is scored on the 16 hand-written questions and on the 40 rust-book questions of
bench/hybrid_questions.yaml (drawn from body sentences, committed before any ranking run):
recall@3 and MRR@10, per record, a record answering when its range overlaps the target's.
The whole rust-book corpus (112 files) is searched.

Usage: python bench/quality_variants.py [--no-record]
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import urllib.request
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402
import corpora  # noqa: E402

from folio import sections  # noqa: E402
from folio.reader import reader_text  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CACHE = Path("/tmp/folio-bench/quality/vectors.pkl")
VARIANTS = [(1000, "own", 0.0), (1000, "reader", 0.0), (857, "own", 0.0), (857, "reader", 0.0),
            (600, "reader", 0.0), (1000, "trail", 0.0), (1000, "nocode", 0.0), (600, "own", 0.0),
            (600, "trail", 0.0), (1000, "own", 0.3), (600, "trail", 0.3)]


class Vectors:
    def __init__(self, url: str):
        self.url = url
        self.cache = pickle.loads(CACHE.read_bytes()) if CACHE.exists() else {}

    def __call__(self, texts: list[str]) -> np.ndarray:
        need = [t for t in dict.fromkeys(texts) if t not in self.cache]
        for i in range(0, len(need), 16):
            batch = need[i:i + 16]
            body = json.dumps({"input": batch, "model": "bench"}).encode()
            req = urllib.request.Request(self.url, body, {"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=600) as r:
                for item in json.load(r)["data"]:
                    v = np.asarray(item["embedding"], dtype=np.float32)
                    self.cache[batch[item["index"]]] = v / np.linalg.norm(v)
        if need:
            CACHE.parent.mkdir(parents=True, exist_ok=True)
            tmp = CACHE.with_suffix(".tmp")
            tmp.write_bytes(pickle.dumps(self.cache))
            tmp.replace(CACHE)
        return np.stack([self.cache[t] for t in texts])


def _nocode(text: str) -> str:
    out, fence = [], False
    for line in text.split("\n"):
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        elif not fence:
            out.append(line)
    return "\n".join(out)


def _header(title: str, trail: tuple[str, ...]) -> str:
    return " > ".join(([title] if title and (not trail or trail[0] != title) else []) + list(trail))


def _text(kind: str, own: str, head: str) -> str:
    if kind == "reader":
        return reader_text(own)
    if kind == "nocode":
        return _nocode(own)
    return head + "\n\n" + own if kind == "trail" else own


def records(root: Path, budget: int, text: str) -> list[tuple[str, int, int, str, str]]:
    """(path, start, end, embedded text, section header) for every record of the corpus."""
    out = []
    for p in sorted(root.rglob("*.md")):
        rel = p.relative_to(root).as_posix()
        doc = sections.parse_document(p.read_text(encoding="utf-8"), budget)
        for r in doc.records:
            head = _header(doc.title, r.trail)
            body = _text(text, r.text, head)
            out.append((rel, r.start, r.end, body, head))
    return out


def questions(root: Path) -> dict[str, list[tuple[str, list[tuple[str, int, int]]]]]:
    hand = []
    for q in yaml.safe_load((REPO / "tests/quality/rust_book.yaml").read_text(encoding="utf-8"))["questions"]:
        targets = [(q["path"], q["heading"])] + [(a["path"], a["heading"]) for a in q.get("alternates", [])]
        ranges = [(path, s.start, s.end) for path, h in targets
                  for s in sections.split_sections((root / path).read_text(encoding="utf-8")) if s.heading == h]
        hand.append((q["q"], ranges))
    drawn = [(q["q"], [(q["path"], q["start"], q["end"])])
             for q in yaml.safe_load((REPO / "bench/hybrid_questions.yaml").read_text(encoding="utf-8"))["questions"]
             if q["corpus"] == "rust-book"]
    return {"hand-written (16)": hand, "drawn (40)": drawn}


def score(recs, mat, heads, w: float, qs, vectors) -> tuple[float, float]:
    qv = vectors([q for q, _ in qs])
    hits = mrr = 0.0
    for (_, ranges), v in zip(qs, qv, strict=True):
        s = mat @ v + (w * (heads @ v) if w else 0.0)
        top = np.argsort(-s)[:10]
        rank = next((k + 1 for k, i in enumerate(top)
                     if any(recs[i][0] == p and recs[i][1] <= e and recs[i][2] >= st for p, st, e in ranges)), None)
        hits += bool(rank and rank <= 3)
        mrr += 1 / rank if rank else 0.0
    return hits / len(qs), mrr / len(qs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-record", action="store_true")
    args = ap.parse_args()
    root = corpora.unpack("rust-book")
    qsets = questions(root)
    srv = common.llama_server(["-ub", "512", "-b", "512"])
    try:
        vectors = Vectors(srv.url)
        table = []
        for budget, text, w in VARIANTS:
            recs = records(root, budget, text)
            mat = vectors([r[3] for r in recs])
            heads = vectors([r[4] for r in recs]) if w else None
            cells = [score(recs, mat, heads, w, qs, vectors) for qs in qsets.values()]
            label = f"{budget} chars, {text}" + (f" +head {w}" if w else "")
            table.append((label, len(recs), cells))
            print(label, len(recs), cells, flush=True)
    finally:
        srv.stop()
    lines = ["| records | n | " + " | ".join(f"{k} recall@3 | {k} MRR@10" for k in qsets) + " |",
             "|---|---|" + "---|---|" * len(qsets)]
    for label, n, cells in table:
        lines.append(f"| {label} | {n} | " + " | ".join(f"{r:.3f} | {m:.3f}" for r, m in cells) + " |")
    print("\n".join(lines))
    if not args.no_record:
        common.record("record text variants, real llama-server, rust-book", [
            ("server", "llama-server b11434, all-MiniLM-L6-v2 f16, -ub 512"),
            ("method", "per record, whole rust-book (112 files); bench/quality_variants.py")], extra=lines)


if __name__ == "__main__":
    main()
