"""Compaction: live records renumbered to slots 0..n-1, in a new matrix generation.

Owns when nothing of the old generation is needed any more: the new matrix is written and synced,
and the lexical segments merged into one renumbered segment, before the one durable commit that
renumbers the records, rebuilds the slot map and switches meta.gen; the old matrix and segments
are removed only after it. A crash before the commit leaves the old index whole (recover() drops
the new files). Must not decide when to compact (indexer._finish does) or how segments merge (the
caller passes lexical's merge).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from folio.store.directory import own, remove_own, writing


class Compaction:
    """Store.compact (uses the matrix, the slot map, the segments and the meta of the Store)."""

    def compact(self, merge_lexical: Callable) -> int:
        """Renumber live records to 0..n-1 in a new matrix generation; returns rows reclaimed."""
        import numpy as np

        from folio.mapped import release

        slots = np.array([r[0] for r in self.conn.execute("SELECT slot FROM records ORDER BY slot")], dtype=np.int64)
        old_rows = self.next_slot()
        dim = self.dim
        for n in self.segment_names():
            self._segment_dir(n)  # refused before anything is written, not after the commit
        gen = self._claim_generation() if dim else self.meta.gen
        new_path = self.matrix_path(gen)
        if dim:
            src = self.matrix()
            try:
                with writing(new_path), open(new_path, "wb", opener=own) as fh:
                    for i in range(0, len(slots), 8192):
                        part = slots[i:i + 8192]
                        valid = part[part < (src.shape[0] if src is not None else 0)]
                        block = np.zeros((len(part), dim), dtype="<f4")
                        if len(valid):
                            block[: len(valid)] = src[valid]
                        fh.write(block.tobytes())
                        if i % (1 << 16) == 0:
                            release(src)  # read once: its pages need not stay in this process
                    fh.flush()
                    os.fsync(fh.fileno())
            except BaseException:
                remove_own(new_path)  # of no use, and a full disk wants its room back now (meta.loose still names it)
                raise
        renumber = np.full(old_rows, -1, dtype=np.int64)
        renumber[slots] = np.arange(len(slots))
        live = np.zeros(old_rows, dtype=bool)
        live[slots] = True
        names = self.segment_names()
        segs = self.lex_segments() if names else []
        # written as it is merged (SegmentWriter): the whole plane is never held in memory
        new_seg = self._stream_segment(lambda sink: merge_lexical(segs, live, renumber, sink=sink)) if names else None
        old_path = self.matrix_path()
        with self.transaction(durable=True) as c:  # the old matrix and segments are removed below
            c.execute("CREATE TEMP TABLE IF NOT EXISTS renum(old INTEGER PRIMARY KEY, new INTEGER)")
            c.execute("DELETE FROM renum")
            c.executemany("INSERT INTO renum(old, new) VALUES (?, ?)",
                          [(int(o), int(n)) for n, o in enumerate(slots)])
            c.execute("UPDATE records SET slot = -1 - (SELECT new FROM renum WHERE old = records.slot)")
            c.execute("UPDATE records SET slot = -1 - slot")
            owners = self._rebuild_slot_map(c)
            c.executemany("DELETE FROM lexseg WHERE name = ?", [(n,) for n in names])
            if new_seg:
                c.execute("INSERT INTO lexseg(name, seq) VALUES (?, 0)", (new_seg,))
            meta = {"rows": len(slots)}
            if dim:
                meta.update(gen=gen, loose=self.meta.gen)
            self._put_meta(**meta)
        self._slots = owners
        if dim:
            self._forget_loose(old_path)
        for n in names:
            remove_own(self._segment_dir(n))
        self._matrix = None
        return old_rows - len(slots)
