"""Reading a `.folio/` index from the outside, to check it is whole and to compare two of them.

Reused by every test that interrupts or races `folio index` (kill tests, concurrent writers, the
robustness issue's random kills). It reads the documented format only (docs/storage.md): the
SQLite file with the stdlib, the matrix with numpy, the lexical segments with numpy — never
folio's own Store, so a bug there cannot hide itself.

- ``read_index(root) -> IndexState``: one consistent read (a single SQLite read transaction).
- ``check_integrity(root, settled=True) -> IndexState``: asserts the invariants a reader relies on.
  ``settled=False`` is the state right after a kill: a tail past the committed high-water mark and
  unreferenced files are allowed there (the next writer's recovery removes them).
- ``assert_same_index(a, b, tol=1e-6)``: same set of (path, start, end, trail, frontmatter,
  text hash), every record with a vector, vectors equal within ``tol``, same lexical plane.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

Key = tuple  # (path, start, end, trail json, frontmatter json, text_hash)


@dataclass
class IndexState:
    root: Path
    meta: dict
    dim: int | None
    rows: int  # the committed high-water mark (meta.rows)
    matrix_path: Path | None
    matrix_bytes: int
    records: dict = field(default_factory=dict)  # key -> (slot, vec)
    files: dict = field(default_factory=dict)  # path -> (size, mtime_ns, sha256)
    segments: list = field(default_factory=list)  # lexseg names in seq order
    matrix: np.ndarray | None = None  # (rows, dim) copy, or None

    def vector(self, key: Key) -> np.ndarray:
        slot, _vec = self.records[key]
        return self.matrix[slot]

    @property
    def keys(self) -> set:
        return set(self.records)


def backdate(root, seconds=10):
    """Move every mtime out of the racy window, so a no-op run really is one."""
    past = time.time() - seconds
    for dirpath, _dirs, files in os.walk(root):
        if ".folio" not in dirpath:
            for f in files:
                os.utime(os.path.join(dirpath, f), (past, past))


def _connect(db: Path) -> sqlite3.Connection:
    # Read-only, and never create a file: a missing index.db must fail, not appear. A run killed
    # mid-transaction before its WAL switch leaves a hot journal, which SQLite undoes only with write
    # access: opened read-write (still never created) once, as folio's readers and next writer do.
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, isolation_level=None)
    try:
        conn.execute("PRAGMA schema_version").fetchone()
        return conn
    except sqlite3.OperationalError as e:
        conn.close()
        if getattr(e, "sqlite_errorname", "") not in ("SQLITE_READONLY_ROLLBACK", "SQLITE_READONLY_RECOVERY"):
            raise
    sqlite3.connect(f"file:{db}?mode=rw", uri=True, isolation_level=None).execute("PRAGMA schema_version").close()
    return sqlite3.connect(f"file:{db}?mode=ro", uri=True, isolation_level=None)


def read_index(root: Path | str) -> IndexState:
    root = Path(root)
    d = root / ".folio"
    db = d / "index.db"
    assert db.is_file(), f"no index.db under {d}"
    conn = _connect(db)
    try:
        conn.execute("BEGIN")
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "meta" not in tables:  # a first run killed before its schema commit: an unborn index
            conn.execute("COMMIT")
            return IndexState(root, {}, None, 0, None, 0)
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        files = {}
        paths = {}
        for fid, path, size, mtime_ns, sha, fm in conn.execute(
                "SELECT id, path, size, mtime_ns, sha256, frontmatter FROM files"):
            files[path] = (size, mtime_ns, sha)
            paths[fid] = (path, json.dumps(json.loads(fm or "{}"), sort_keys=True, ensure_ascii=False))
        records = {}
        slots_seen = set()
        for slot, fid, start, end, trail, th, vec in conn.execute(
                'SELECT slot, file_id, start, "end", trail, text_hash, vec FROM records'):
            assert fid in paths, f"record at slot {slot} names file id {fid}, which is not in files"
            assert slot not in slots_seen, f"slot {slot} appears twice"
            slots_seen.add(slot)
            path, fm = paths[fid]
            key = (path, start, end, json.dumps(json.loads(trail or "[]"), ensure_ascii=False), fm, th)
            assert key not in records, f"record {key[:3]} appears twice"
            records[key] = (slot, bool(vec))
        segments = [r[0] for r in conn.execute("SELECT name FROM lexseg ORDER BY seq")]
        if meta.get("slotmap") == "1":  # the map every writer keeps beside the records must agree with them
            owners: dict[int, int] = {}
            for slot, fid, vec in conn.execute("SELECT slot, file_id, vec FROM records"):
                owners[slot] = fid * 2 + (1 if vec else 0)
            chunks = conn.execute("SELECT chunk, data FROM slotmap ORDER BY chunk").fetchall()
            assert [c for c, _ in chunks] == list(range(len(chunks))), "slot map chunks are not 0..n-1"
            kept = np.frombuffer(b"".join(d for _, d in chunks), dtype="<i8")
            wrong = [i for i in np.flatnonzero(kept >= 0).tolist() if owners.get(i) != kept[i]]
            wrong += [s for s, o in owners.items() if s >= len(kept) or kept[s] != o]
            assert not wrong, f"the slot map disagrees with the records at slots {sorted(set(wrong))[:5]}"
        conn.execute("COMMIT")
    finally:
        conn.close()
    dim = int(meta["dim"]) if meta.get("dim") else None
    rows = int(meta.get("rows") or 0)
    gen = int(meta.get("gen") or 0)
    mpath = None
    mbytes = 0
    matrix = None
    if dim:
        mpath = d / ("vectors.f32" if gen == 0 else f"vectors.{gen}.f32")
        assert mpath.is_file() or rows == 0, f"meta names generation {gen} but {mpath.name} is missing"
        if mpath.is_file():
            mbytes = mpath.stat().st_size
            if rows:
                assert mbytes >= rows * dim * 4, (
                    f"{mpath.name} holds {mbytes} bytes, fewer than the {rows} committed rows need")
                matrix = np.fromfile(mpath, dtype="<f4", count=rows * dim).reshape(rows, dim)
    return IndexState(root, meta, dim, rows, mpath, mbytes, records, files, segments, matrix)


def check_integrity(root: Path | str, *, settled: bool = True) -> IndexState:
    """Assert what a reader relies on; `settled` adds what a finished writer guarantees."""
    st = read_index(root)
    d = Path(root) / ".folio"
    if not st.meta and not settled:
        return st  # unborn: readers say "no index yet", the next writer starts it
    assert st.meta.get("format") == "1", f"format {st.meta.get('format')!r}"
    for key, (slot, vec) in st.records.items():
        assert slot >= 0, f"negative slot {slot} for {key[:3]}"
        if st.dim:
            assert slot < st.rows, f"slot {slot} of {key[:3]} is past the high-water mark {st.rows}"
        if vec:
            assert st.dim and st.matrix is not None, f"{key[:3]} claims a vector but the index has no matrix"
            v = st.matrix[slot]
            assert np.all(np.isfinite(v)), f"row {slot} of {key[:3]} is not finite"
            n = float(np.linalg.norm(v))
            assert abs(n - 1.0) < 1e-3, f"row {slot} of {key[:3]} has norm {n}, not 1 (unwritten row?)"
    # Ranges of one file never overlap and every line number is 1-based.
    by_path: dict[str, list] = {}
    for key in st.records:
        by_path.setdefault(key[0], []).append((key[1], key[2]))
    for path, ranges in by_path.items():
        ranges.sort()
        for (s1, e1), (s2, _e2) in zip(ranges, ranges[1:], strict=False):
            assert 1 <= s1 <= e1 < s2, f"{path}: ranges {s1}-{e1} and {s2}-... overlap"
    for name in st.segments:
        seg = d / "lex" / name
        assert seg.is_dir(), f"lexical segment {name} is named but missing"
        assert any(seg.glob("*.npy")), f"lexical segment {name} is empty"
    if settled:
        if st.dim:  # grown ahead of its rows (store/matrix.py: capacity), never past that
            from folio.store.matrix import capacity

            assert st.rows * st.dim * 4 <= st.matrix_bytes <= capacity(st.rows) * st.dim * 4, (
                f"{st.matrix_path.name} holds {st.matrix_bytes} bytes; rows*dim*4 = {st.rows * st.dim * 4}, "
                f"capacity {capacity(st.rows) * st.dim * 4}")
        extra = sorted(p.name for p in d.glob("vectors*.f32") if p != st.matrix_path)
        assert not extra, f"matrices no commit names: {extra}"
        lex = d / "lex"
        if lex.is_dir():
            orphans = sorted(p.name for p in lex.iterdir() if p.name not in set(st.segments))
            assert not orphans, f"lexical segments no commit names: {orphans}"
    return st


def lexical_scores(root: Path | str, query: str) -> dict:
    """BM25F score of every live record for `query`, by record key (reads the segments with
    folio.lexical's scorer over the arrays on disk)."""
    from folio import lexical

    st = read_index(root)
    d = Path(root) / ".folio" / "lex"
    segs = []
    for name in st.segments:
        segs.append({f.stem: np.load(f) for f in (d / name).glob("*.npy")})
    n = max([s for s, _ in st.records.values()], default=-1) + 1
    n = max(n, st.rows)
    live = np.zeros(n, dtype=bool)
    for slot, _vec in st.records.values():
        live[slot] = True
    scores = lexical.score(lexical.analyze(query), segs, live) if segs else np.zeros(n)
    return {key: float(scores[slot]) for key, (slot, _vec) in st.records.items()}


DEFAULT_QUERIES = ("how does ownership work", "error handling with result", "install the toolchain",
                   "structs and methods", "tests")


def assert_same_index(a: Path | str, b: Path | str, *, tol: float = 1e-6,
                      queries: tuple[str, ...] = DEFAULT_QUERIES) -> None:
    """Index `a` equals index `b` (a clean build): records, vectors and the lexical plane.
    Slot numbers, generations and bytes on disk may differ."""
    sa, sb = check_integrity(a), check_integrity(b)
    missing, extra = sb.keys - sa.keys, sa.keys - sb.keys
    assert not missing and not extra, (
        f"records differ: {len(missing)} missing, e.g. {sorted(missing)[:3]}; "
        f"{len(extra)} extra, e.g. {sorted(extra)[:3]}")
    assert (sa.dim, sa.meta.get("budget")) == (sb.dim, sb.meta.get("budget"))
    assert set(sa.files) == set(sb.files), "file sets differ"
    assert {p: v[2] for p, v in sa.files.items()} == {p: v[2] for p, v in sb.files.items()}, "file hashes differ"
    for key in sb.keys:
        va, vb = sa.records[key][1], sb.records[key][1]
        assert va == vb, f"{key[:3]}: vector present {va} here, {vb} in the clean build"
        if va:
            diff = float(np.max(np.abs(sa.vector(key) - sb.vector(key))))
            assert diff <= tol, f"{key[:3]}: vectors differ by {diff}"
    for q in queries:
        la, lb = lexical_scores(a, q), lexical_scores(b, q)
        bad = [k for k in lb if not math.isclose(la[k], lb[k], rel_tol=1e-5, abs_tol=1e-6)]
        assert not bad, f"lexical scores for {q!r} differ on {len(bad)} records, e.g. {bad[0][:3]}: " \
                        f"{la[bad[0]]} vs {lb[bad[0]]}"
