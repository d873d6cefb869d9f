"""The lexical plane's segments on disk: `lex/<name>/<array>.npy`, named by `lexseg(name, seq)`.

One segment per committed batch (its arrays: folio/lexical/segments.py); <name> is `<hex time>-<pid>`,
written under `<name>.tmp` and renamed whole. A newer segment wins per slot, so `seq` orders them.

Owns writing a segment (each array fsynced before the rename, the rename before the commit that
names it; a write that fails removes the `.tmp` and names its file), reading the segments the
records name (memory-mapped; a reader keeps them by name: a segment's files never change under its
name), checking them from their .npy headers alone (a no-op `folio index` never imports numpy),
swapping segments for a merged one, and removing the ones no commit names. index.db is data too (it
may come with a clone): a segment name folio does not make is refused, never read or removed. Must
not build, merge or score segments (folio/lexical/).
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from folio.store.directory import (
    SEGMENT_NAME,
    corrupt,
    linked,
    lost,
    own,
    own_dir,
    remove_own,
    writing,
)

_SEGMENT_ARRAYS = ("doc_slots", "doc_len", "terms", "offsets", "post_doc", "post_tf")

_NPY_ITEM = {"<i8": 8, "<u8": 8, "<f8": 8, "<i4": 4, "<u4": 4, "<f4": 4, "<i2": 2, "<u2": 2, "|b1": 1, "|u1": 1,
             "|i1": 1}

# The header numpy writes: the repr of {'descr': ..., 'fortran_order': ..., 'shape': (...)}, padded.
_NPY_DICT = re.compile(r"\{'descr': '([<>|=][a-z][0-9]+)', 'fortran_order': (False|True), "
                       r"'shape': \(((?:[0-9]+, ?)*[0-9]*)\), \}[ \n]*\Z")


class Segments:
    """The Store's lexical segments (uses its conn, write, dir and transaction; owns `_lex_cache`,
    a reader's segments by name)."""

    _lex_cache: dict[str, dict]

    def segment_names(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT name FROM lexseg ORDER BY seq")]

    def lex_segments(self) -> list[dict]:
        import numpy as np

        segs = []
        names = [r[0] for r in self.conn.execute("SELECT name FROM lexseg ORDER BY seq")]
        for gone in set(self._lex_cache) - set(names):
            del self._lex_cache[gone]
        for name in names:
            if name in self._lex_cache:  # a segment's files never change under its name
                segs.append(self._lex_cache[name])
                continue
            d = self._segment_dir(name)
            seg = {}
            f = d
            try:
                for f in _segment_files(d):
                    if f.suffix == ".npy":
                        try:
                            seg[f.stem] = np.load(f, mmap_mode="r")
                        except ValueError:
                            seg[f.stem] = np.load(f)  # e.g. an empty array cannot be mapped
            except FileNotFoundError:
                raise lost(self.dir, f"lexical segment {name} is missing") from None
            except (ValueError, OSError, EOFError):  # truncated, overwritten, not an array
                raise corrupt(self.dir, f"lex/{name}/{f.name} is not a whole numpy array") from None
            if not _segment_whole(seg):  # arrays missing: being removed by a writer's merge, or damage
                raise lost(self.dir, f"lexical segment {name} is incomplete")
            if not self.write:
                self._lex_cache[name] = seg
            segs.append(seg)
        return segs

    def _check_segments(self) -> None:
        for (name,) in self.conn.execute("SELECT name FROM lexseg ORDER BY seq"):
            self._check_segment(name)

    def _check_segment(self, name: str) -> None:
        """What lex_segments would refuse (missing, truncated, overwritten or incomplete arrays),
        from the .npy headers and file sizes alone: a no-op `folio index` never imports numpy."""
        d = self._segment_dir(name)
        heads: dict[str, tuple] = {}
        f = d
        try:
            for f in _segment_files(d):
                if f.suffix == ".npy":
                    heads[f.stem] = _npy_head(f)
        except FileNotFoundError:
            raise lost(self.dir, f"lexical segment {name} is missing") from None
        except (ValueError, OSError, EOFError, SyntaxError, MemoryError, RecursionError):
            raise corrupt(self.dir, f"lex/{name}/{f.name} is not a whole numpy array") from None
        if not all(k in heads for k in _SEGMENT_ARRAYS):
            raise lost(self.dir, f"lexical segment {name} is incomplete")
        n = {k: (heads[k][0] or (1,))[0] for k in _SEGMENT_ARRAYS}
        whole = (n["doc_len"] == n["doc_slots"] and n["offsets"] == n["terms"] + 1 and n["post_tf"] == n["post_doc"]
                 and heads["offsets"][1] == "<i8" and n["offsets"] > 0)
        if whole:
            with open(d / "offsets.npy", "rb") as fh:
                fh.seek(heads["offsets"][2] + 8 * (n["offsets"] - 1))
                whole = int.from_bytes(fh.read(8), "little", signed=True) == n["post_doc"]
        if not whole:
            raise lost(self.dir, f"lexical segment {name} is incomplete")

    def _segment_dir(self, name: str) -> Path:
        """lex/<name> for a segment the records name; index.db is data too (it may come with a clone),
        so a name folio does not make (`../../elsewhere`) is refused, never read or removed."""
        if not isinstance(name, str) or not SEGMENT_NAME.match(name) or name.endswith(".tmp"):
            raise corrupt(self.dir, f"it names a lexical segment {name!r}, which is not a name folio makes")
        return self.dir / "lex" / name

    def _write_segment(self, seg: dict) -> str:
        import numpy as np

        lex = self.dir / "lex"
        own_dir(lex)
        name = f"{time.time_ns():x}-{os.getpid()}"
        tmp = lex / (name + ".tmp")
        with writing(tmp):
            tmp.mkdir()
        try:
            for key, arr in seg.items():
                path = tmp / f"{key}.npy"
                with writing(path), open(path, "xb", opener=own) as fh:
                    # through write(): numpy writes a real file with fwrite, whose short write on a
                    # full disk is an OSError with no errno ("N requested and M written")
                    np.save(_Writes(fh), np.ascontiguousarray(arr))
                    fh.flush()
                    os.fsync(fh.fileno())
            with writing(lex / name):
                os.replace(tmp, lex / name)
        except BaseException:
            remove_own(tmp)  # what it holds is of no use, and a full disk wants its room back now
            raise
        return name

    def _stream_segment(self, build) -> str:
        """A segment written as `build(sink)` hands it over (lexical.segments.merge_segments with a
        sink: SegmentWriter), so a merge of a whole corpus is never held in memory; where `build`
        returns the arrays instead, they are written whole. Returns its name, as _write_segment does."""
        w = SegmentWriter(self.dir / "lex")
        try:
            got = build(w)
            if isinstance(got, dict):
                w.abandon()
                return self._write_segment(got)
            return w.finish()
        except BaseException:
            w.abandon()
            raise

    @staticmethod
    def _add_segment(c, name: str) -> None:
        """Inside commit's transaction: name a segment written by _write_segment, newest of all."""
        seq = c.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM lexseg").fetchone()[0]
        c.execute("INSERT INTO lexseg(name, seq) VALUES (?, ?)", (name, seq))

    def replace_segments(self, seg, old_names: list[str] | None = None) -> None:
        """Swap the listed segments (default: all) for one merged segment, in one commit. `seg`: its
        arrays, or a function of a sink that writes it as it is merged (_stream_segment), or None."""
        names = old_names if old_names is not None else [r[0] for r in self.conn.execute("SELECT name FROM lexseg")]
        new = None if seg is None else self._stream_segment(seg) if callable(seg) else self._write_segment(seg)
        with self.transaction(durable=True) as c:  # the replaced segments are removed below
            q = ",".join("?" * len(names))
            seq = c.execute(f"SELECT MAX(seq) FROM lexseg WHERE name IN ({q})", names).fetchone()[0] or 0
            c.executemany("DELETE FROM lexseg WHERE name = ?", [(n,) for n in names])
            if new:  # takes the place of the newest segment it replaces: newer segments still win
                c.execute("INSERT INTO lexseg(name, seq) VALUES (?, ?)", (new, seq))
        for n in names:
            remove_own(self._segment_dir(n))

    def _remove_orphan_segments(self) -> None:
        """Remove what a killed writer left in lex/: segments (and `.tmp` ones) no commit names."""
        names = {r[0] for r in self.conn.execute("SELECT name FROM lexseg")}
        lex = self.dir / "lex"
        if lex.is_dir() and not lex.is_symlink():
            with os.scandir(lex) as it:
                for e in it:
                    if SEGMENT_NAME.match(e.name) and e.name not in names:
                        remove_own(e.path)


class SegmentWriter:
    """A segment written as a merge hands it over (the sink of lexical.segments.merge_segments): the
    doc arrays first, then the postings appended to post_doc.npy and post_tf.npy (their headers
    written up front from the count the merge announces), then terms and offsets; every file
    fsynced and the directory renamed into place by finish(), as _write_segment does."""

    def __init__(self, lex: Path):
        self.lex = lex
        self.name = f"{time.time_ns():x}-{os.getpid()}"
        self.tmp = None
        self.files: dict = {}
        self.left = 0

    def _save(self, key: str, arr) -> None:
        import numpy as np

        path = self.tmp / f"{key}.npy"
        with writing(path), open(path, "xb", opener=own) as fh:
            np.save(_Writes(fh), np.ascontiguousarray(arr))
            fh.flush()
            os.fsync(fh.fileno())

    def head(self, seg: dict, n_post: int) -> None:
        import numpy as np

        own_dir(self.lex)
        self.tmp = self.lex / (self.name + ".tmp")
        with writing(self.tmp):
            self.tmp.mkdir()
        for key in ("version", "doc_slots", "doc_len"):
            self._save(key, seg[key])
        for key, shape, dtype in (("post_doc", (n_post,), "<i4"), ("post_tf", (n_post, 5), "<u2")):
            path = self.tmp / f"{key}.npy"
            with writing(path):
                fh = open(path, "xb", opener=own)  # noqa: SIM115 - closed by finish or abandon
                self.files[key] = fh
                np.lib.format.write_array_header_1_0(fh, {"descr": dtype, "fortran_order": False, "shape": shape})
        self.left = n_post

    def postings(self, doc, tf) -> None:
        import numpy as np

        if len(doc) > self.left or tf.shape != (len(doc), 5):
            raise ValueError("internal: a merge handed over more postings than it announced")
        for key, arr, dtype in (("post_doc", doc, "<i4"), ("post_tf", tf, "<u2")):
            fh = self.files[key]
            with writing(fh.name):
                fh.write(np.ascontiguousarray(arr, dtype=dtype).tobytes())
        self.left -= len(doc)

    def tail(self, terms, offsets) -> None:
        self._save("terms", terms)
        self._save("offsets", offsets)

    def done(self) -> SegmentWriter:
        return self

    def finish(self) -> str:
        if self.tmp is None or self.left:
            raise ValueError("internal: a merge ended before all the postings it announced")
        for fh in self.files.values():
            with writing(fh.name):
                fh.flush()
                os.fsync(fh.fileno())
            fh.close()
        self.files = {}
        with writing(self.lex / self.name):
            os.replace(self.tmp, self.lex / self.name)
        return self.name

    def abandon(self) -> None:
        for fh in self.files.values():
            fh.close()
        self.files = {}
        if self.tmp is not None:
            remove_own(self.tmp)  # what it holds is of no use, and a full disk wants its room back now


class _Writes:
    """A file as np.save sees an object that only writes: it writes through `write`, so a full disk
    raises the OSError the file's own write raises (ENOSPC), not fwrite's short count."""

    __slots__ = ("write",)

    def __init__(self, fh):
        self.write = fh.write


def _segment_files(d: Path) -> list[Path]:
    """The files of one lexical segment, refusing a link among them (folio never made one)."""
    if os.path.islink(d):
        raise linked(d)
    out = []
    with os.scandir(d) as it:
        for e in it:
            if e.is_symlink():
                raise linked(e.path)
            out.append(Path(e.path))
    return out


def _npy_head(path: Path) -> tuple[tuple[int, ...], str, int]:
    """(shape, dtype, data offset) of a plain .npy array file whose size holds all its data;
    ValueError for anything else (another format, an object array, a truncated file)."""
    with open(path, "rb") as fh:
        head = fh.read(12)
        if len(head) < 10 or head[:6] != b"\x93NUMPY" or head[6] not in (1, 2, 3):
            raise ValueError("not a .npy file")
        if head[6] == 1:
            start, size = 10, int.from_bytes(head[8:10], "little")
        else:
            start, size = 12, int.from_bytes(head[8:12], "little")
        fh.seek(start)
        text = fh.read(size)
        if len(text) < size:
            raise ValueError("truncated header")
        header = text.decode("latin-1")
        m = _NPY_DICT.match(header)  # numpy's own header: read without ast (~5 ms of a no-op run)
        if m is not None:
            meta = {"descr": m[1], "fortran_order": m[2] == "True",
                    "shape": tuple(int(x) for x in m[3].replace(",", " ").split())}
        else:
            import ast

            meta = ast.literal_eval(header)
        if not isinstance(meta, dict) or meta.get("fortran_order") is not False or meta.get("descr") not in _NPY_ITEM:
            raise ValueError("not a plain array")
        shape = meta.get("shape")
        if not isinstance(shape, tuple) or not all(isinstance(x, int) and x >= 0 for x in shape):
            raise ValueError("bad shape")
        count = 1
        for x in shape:
            count *= x
        data = start + size
        if os.fstat(fh.fileno()).st_size < data + count * _NPY_ITEM[meta["descr"]]:
            raise ValueError("truncated data")
    return shape, meta["descr"], data


def _segment_whole(seg: dict) -> bool:
    if not all(k in seg for k in _SEGMENT_ARRAYS):
        return False
    try:
        return (len(seg["doc_len"]) == len(seg["doc_slots"]) and len(seg["offsets"]) == len(seg["terms"]) + 1
                and len(seg["post_tf"]) == len(seg["post_doc"]) and int(seg["offsets"][-1]) == len(seg["post_doc"]))
    except (TypeError, IndexError, ValueError):
        return False
