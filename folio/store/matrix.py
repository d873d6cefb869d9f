"""The matrix: `vectors.f32` / `vectors.<gen>.f32`, every record's vector as one float32 row.

Row-major little-endian float32, shape (meta.rows, meta.dim), L2-normalised rows, row = slot; a row
is meaningful only where records.vec = 1. The file is grown ahead of the rows, to capacity(rows):
what lies past meta.rows (zeros, or rows a killed writer left) is never read, and is overwritten
before a commit names it. A new generation (a new vector space, compaction) is written under its own
name and switched to in the commit that names it (meta.gen).

Owns the file's name by generation, mapping it read-only for a query (kept across queries while the
file is the same: the inode and size are the key; a commit that adds rows within the capacity is
seen through the same mapping, where a new one cost the next query ~150 ms at 526k rows to fault
its pages in and drop the old ones), writing a batch's rows and growing the file (flushed and
fsynced before the commit that names them, or ahead of it: write_ahead), a new generation's empty
file, and dropping what a killed writer left past the capacity. Must not write index.db (the Store
commits what names the rows) or rank.
"""

from __future__ import annotations

import os
from pathlib import Path

from folio.errors import FolioError
from folio.store.directory import Vanished, corrupt, lost, own, remove_own, writing


def capacity(rows: int) -> int:
    """The rows the file is grown to when it must hold `rows`: a multiple of 1/32 of the power of
    two at or above them (at least 256 rows), so at most ~6% of it lies ahead of the rows, and the
    file keeps its size over thousands of small commits."""
    step = max(256, (1 << max(rows - 1, 1).bit_length()) // 32)
    return -(-rows // step) * step


def matrix_name(gen: int) -> str:
    """The matrix file of generation `gen`, by name."""
    return "vectors.f32" if gen == 0 else f"vectors.{gen}.f32"


class Matrix:
    """The Store's matrix (uses its dir and meta; owns `_matrix`, the mapping, and `_matrix_key`)."""

    _matrix: object
    _matrix_key: tuple | None

    @property
    def dim(self) -> int | None:
        return self.meta.dim

    @property
    def rows(self) -> int:
        return self.meta.rows

    def matrix_path(self, gen: int | None = None) -> Path:
        return self.dir / matrix_name(self.meta.gen if gen is None else gen)

    def _claim_generation(self) -> int:
        """The next generation's number, recorded (meta.loose) before its file is made, so recovery
        removes the file of a writer killed before the commit that switches to it, and nothing else:
        a name held by a file the index does not name (`.folio` may be a link to a directory that
        holds other things) is skipped, that file left as it is."""
        gen = self.meta.gen + 1
        while os.path.lexists(self.matrix_path(gen)):
            gen += 1
        self.set_meta(loose=gen)
        return gen

    def _forget_loose(self, path: Path) -> None:
        """After the commit that switched generations (meta.loose then names the old one): remove the
        old file, and the record of it."""
        remove_own(path)
        self.set_meta(loose=None)

    def _check_matrix_size(self, path: Path, st: os.stat_result, rows: int, dim: int) -> None:
        """The matrix file (`st`: its stat) holds every row the records name, or one sentence with the fix."""
        if st.st_size < rows * dim * 4:
            raise corrupt(self.dir, f"{path.name} holds {st.st_size // (dim * 4)} rows, the records name {rows}")

    def _open_matrix(self, path: Path) -> int:
        """The matrix file opened for reading (a descriptor); a file removed (a rebuild under way) is
        Vanished."""
        try:
            return os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            raise self._missing(path) from None

    def _missing(self, path: Path) -> Vanished:
        return lost(self.dir, f"{path.name} is missing")

    def _stat_matrix(self, path: Path) -> os.stat_result:
        try:
            return path.stat()
        except FileNotFoundError:
            raise self._missing(path) from None

    def _check_matrix(self) -> None:
        dim, rows = self.dim, self.rows
        if dim and rows:
            path = self.matrix_path()
            self._check_matrix_size(path, self._stat_matrix(path), rows, dim)

    def matrix(self):
        """The committed matrix, memory-mapped read-only: shape (rows, dim). None without vectors."""
        dim, rows = self.dim, self.rows
        if not dim or not rows:
            return None
        path = self.matrix_path()
        # The inode is part of the key: a store kept open across queries (`folio mcp`, a run's
        # copies) never reads a mapping of a file another process removed and wrote anew under the
        # same name. The mapping kept is of the file stat'ed, whatever happens to the name after.
        st = self._stat_matrix(path)
        if self._matrix is not None and self._matrix_key == (str(path), st.st_size, dim, st.st_ino):
            self._check_matrix_size(path, st, rows, dim)
            return self._matrix[:rows]  # the file's every row is mapped: a view of the committed ones
        # A new mapping: one open file is checked and mapped, so a file another process removes or
        # replaces in between (a rebuild under way) cannot be stat'ed as one file and mapped as another.
        import numpy as np

        fd = self._open_matrix(path)
        with open(fd, "rb", buffering=0) as f:
            st = os.fstat(fd)
            self._check_matrix_size(path, st, rows, dim)
            self._matrix = np.memmap(f, dtype="<f4", mode="r", shape=(st.st_size // (dim * 4), dim))
        self._matrix_key = (str(path), st.st_size, dim, st.st_ino)
        return self._matrix[:rows]

    def read_vectors(self, slots: list[int]):
        m = self.matrix()
        return None if m is None else m[slots].copy()

    def _write_rows(self, vectors: dict, rows_after: int) -> None:
        """Before a commit: its vectors (slot -> vector) written at their rows, the file grown to
        `rows_after` rows, flushed and synced; only grown when the batch holds no vector."""
        dim = self.dim
        if vectors:
            import numpy as np

            if not dim:
                raise FolioError("internal: vectors written before the space was set")
            path = self.matrix_path()
            mode = "r+b" if path.exists() else "w+b"
            with writing(path), open(path, mode, opener=own) as fh:
                if fh.seek(0, 2) < rows_after * dim * 4:
                    fh.truncate(capacity(rows_after) * dim * 4)
                for first, run in _runs(vectors):
                    # One write per run of consecutive slots, not one per row: the page cache keeps
                    # the pages of a 3 KB write as single pages and those of a large one as large
                    # folios, and a query maps, scans and unmaps a matrix of large folios several
                    # times faster (docs/performance.md, "The scan and its teardown").
                    fh.seek(first * dim * 4)
                    fh.write(b"".join(np.ascontiguousarray(v, dtype="<f4").tobytes() for v in run))
                fh.flush()
                os.fsync(fh.fileno())
        elif dim and rows_after > self.rows:
            path = self.matrix_path()
            with writing(path), open(path, "r+b" if path.exists() else "w+b", opener=own) as fh:
                if fh.seek(0, 2) < rows_after * dim * 4:
                    fh.truncate(capacity(rows_after) * dim * 4)

    def write_ahead(self, vectors: dict, high_water: int) -> None:
        """A batch's vectors written (and synced) at their rows before the commit that names them, the
        file grown to `high_water` rows: a writer holding one part of a big batch at a time. Each of
        those rows is past the committed ones or held by a record without a vector, so no reader
        looks at it until that commit; a writer killed first leaves them to _recover_matrix."""
        self._write_rows(vectors, max(self.rows, high_water))

    def _new_matrix(self, gen: int, rows: int, dim: int) -> Path:
        """A new generation's file: `rows` rows of zeros, synced (new_space)."""
        path = self.matrix_path(gen)
        with writing(path), open(path, "wb", opener=own) as fh:
            fh.truncate(rows * dim * 4)
            fh.flush()
            os.fsync(fh.fileno())
        return path

    def _recover_matrix(self) -> None:
        """Drop what a killed writer left past the committed state: the generation it was writing or
        had replaced (meta.loose: never a file the index does not name), and what it grew the file by
        past the capacity of the committed rows (rows within it are never read: see the module header)."""
        dim, rows = self.dim, self.rows
        current = self.matrix_path()
        loose = self.meta.loose
        if loose is not None:
            if loose != self.meta.gen:
                remove_own(self.matrix_path(loose))
            self.set_meta(loose=None)
        if dim and current.exists() and current.stat().st_size > capacity(rows) * dim * 4:
            with open(current, "r+b", opener=own) as fh:
                fh.truncate(capacity(rows) * dim * 4)


def _runs(vectors: dict):
    """(first slot, [vectors of first, first + 1, ...]) for each run of consecutive slots, in order."""
    run: list = []
    first = prev = None
    for slot, vec in sorted(vectors.items()):
        if run and slot != prev + 1:
            yield first, run
            run = []
        if not run:
            first = slot
        run.append(vec)
        prev = slot
    if run:
        yield first, run
