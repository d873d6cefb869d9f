"""A huge single-line file (issue 15, item 9): its one record's body is counted by the lexical
plane chunk by chunk, in memory that follows its distinct words rather than its length
(bench/single_line_memory.py measures the peak: 49 MB, 1,060 MB -> 266 MB), and the segment is the
same array for array as the per-token path gives."""

from __future__ import annotations

import json
import random

import numpy as np

from folio.lexical import segments as lexical

WORDS = ["alpha", "Beta", "the", "running", "café", "naïve-word", "x1y2", "lighthouse", "and", "日本語", "Ünïcode"]


def _line(n: int, seed: int = 3) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) + (str(rng.randint(0, 50)) if rng.random() < .3 else "") for _ in range(n))


def test_a_huge_body_counts_to_the_same_segment(monkeypatch):
    big = _line(400_000)
    assert len(big) > lexical._HUGE
    docs = [(0, "small body here", "H", "T", "a.md", ""), (5, big, "Huge", "T", "b.md", "ctx"),
            (7, big, "Huge2", "T2", "c.md", ""), (9, "", "Empty", "T", "d.md", "")]
    for batch in (docs, docs[1:2]):
        chunked = lexical.build_segment(batch)
        monkeypatch.setattr(lexical, "_HUGE", 1 << 40)
        whole = lexical.build_segment(batch)
        monkeypatch.undo()
        assert chunked.keys() == whole.keys()
        for k in whole:
            assert chunked[k].dtype == whole[k].dtype and np.array_equal(chunked[k], whole[k]), k


def test_a_huge_single_line_file_is_indexed_and_found_by_any_word(tmp_path, fake_server, write_tree, run_folio):
    line = _line(600_000, seed=5)  # ~4 MB on one line
    third = len(line) // 3
    line = line[:third] + " zebrafirst " + line[third:] + " zebralast"
    root = write_tree(tmp_path / "c", {"huge.md": "# Huge\n\n" + line + "\n", "small.md": "# Small\n\nzebrafirst once.\n"})
    srv = fake_server(dim=32)
    r = run_folio("index", "--endpoint", srv.url, cwd=root, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr and r.stdout.startswith("indexed 2 files")
    for word in ("zebrafirst", "zebralast", "lighthouse"):
        r = run_folio("query", word, "--lexical", "--json", cwd=root)
        assert r.returncode == 0, r.stderr
        refs = [h["ref"] for h in json.loads(r.stdout)["results"]]
        assert "huge.md:3-3" in refs, (word, refs)  # the line itself (the heading is its own record)
