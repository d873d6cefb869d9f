"""A merge written to disk as it goes (folio/store/segments.py SegmentWriter, the sink of
lexical.segments.merge_segments) is the same segment as the merge collected in memory, array for
array, read back the way a query reads it (memory-mapped); inputs mapped from files merge the same
while their pages are given back (folio/mapped.py); a merge that fails leaves nothing in lex/."""

from __future__ import annotations

import random

import numpy as np
import pytest

from folio.lexical import segments as lx
from folio.lexical.segments import build_segment, merge_segments
from folio.store.segments import SegmentWriter


def corpus(n: int = 200, seed: int = 3):
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(400)]

    def doc(s):
        return (s, " ".join(rng.choices(words, k=rng.randint(0, 40))), f"head {s % 7}", "title", f"d/{s % 5}.md", "")

    segs = [build_segment([doc(s) for s in range(i, min(n, i + 23))]) for i in range(0, n, 23)]
    segs.append(build_segment([doc(s) for s in (1, n // 4, n - 1)]))
    live = np.ones(n, dtype=bool)
    live[[4, n // 3]] = False
    return segs, live


def load(d):
    return {f.stem: np.load(f, mmap_mode="r") for f in d.iterdir()}


def test_a_merge_written_as_it_goes_is_the_merge_in_memory(tmp_path, monkeypatch):
    segs, live = corpus()
    want = merge_segments(segs, live)
    monkeypatch.setattr(lx, "MERGE_CHUNK", 16)  # many ranges, each handed over on its own
    name = merge_segments(segs, live, sink=SegmentWriter(tmp_path / "lex")).finish()
    got = load(tmp_path / "lex" / name)
    assert got.keys() == want.keys()
    for key in want:
        assert got[key].dtype == want[key].dtype, key
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)
    # the merged segment merges again from its mapped files, their pages given back as it goes
    monkeypatch.setattr(lx, "MERGE_MAPPED", 64)
    again = merge_segments([got], np.ones(len(live), dtype=bool))
    for key in want:
        np.testing.assert_array_equal(again[key], want[key], err_msg=key)
    # many mapped inputs, each range's pages given back segment by segment (mapped.release_rows)
    mapped = []
    for i, seg in enumerate(segs):
        d = tmp_path / f"in{i}"
        d.mkdir()
        for key, arr in seg.items():
            np.save(d / f"{key}.npy", arr)
        mapped.append(load(d))
    from_files = merge_segments(mapped, live)
    for key in want:
        np.testing.assert_array_equal(from_files[key], want[key], err_msg=key)


def test_nothing_live_and_a_failed_merge(tmp_path):
    segs, live = corpus(40)
    name = merge_segments(segs, np.zeros(len(live), dtype=bool), sink=SegmentWriter(tmp_path / "lex")).finish()
    got = load(tmp_path / "lex" / name)
    assert len(got["doc_slots"]) == 0 and len(got["post_doc"]) == 0 and got["offsets"].tolist() == [0]

    w = SegmentWriter(tmp_path / "lex2")
    w.head({k: v for k, v in segs[0].items() if k in ("version", "doc_slots", "doc_len")}, 10)
    with pytest.raises(ValueError):
        w.finish()  # fewer postings than announced: never renamed into place
    w.abandon()
    assert list((tmp_path / "lex2").iterdir()) == []
