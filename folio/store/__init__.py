"""The `.folio/` directory: SQLite records, the float32 matrix, lexical segments, the write lock.

Owns every byte under `.folio/`; `Store` (core.py) is the one door callers use. Each part of the
index has its own module, and its own header saying what it owns:

  core.py        Store: opening (format check, another program's index.db refused, read-only readers),
                 transactions and snapshots, the typed meta, and the writes that span the parts
                 (commit, new_space, recover); Batch; discard (what `--rebuild` removes: what the index names);
                 damage_among (which index of several a damage sentence or SQLite's error names)
  directory.py   the names folio owns in `.folio/` and the rules for them: no-follow opens, what
                 `--rebuild` removes (remove_index), the sentences for a directory folio cannot vouch for
  meta.py        the meta table: Meta (typed reads), writes by field name, FORMAT
  records.py     index.db's schema (SCHEMA), the files and records tables and their queries
  matrix.py      vectors.f32 / vectors.<gen>.f32: mapping, writing rows, generations
  slotmap.py     the slot map (every slot's owner in a few blobs) and its partial reads
  cleanset.py    the cleanset row (the stat prefilter's clean stamps and the records count)
  segments.py    lex/<name>/*.npy: writing, reading, checking and swapping lexical segments
  compaction.py  renumbering live records into a new generation
  lock.py        write.lock: the one writer

The format (version 1), readable with sqlite3 and one numpy line, is docs/storage.md; each
module's header has its part. Importing this package loads neither numpy nor anything the no-op
`folio index` does not need (tests/test_lean_paths.py).
"""

from folio.store.core import Batch, Store, damage_among, discard, read_meta, sqlite_damage
from folio.store.directory import Damaged, NoIndex, Vanished, corrupt, exists, identity, index_dir
from folio.store.lock import LockBusy, acquire_lock, held_here, read_note, write_note
from folio.store.meta import META_KEYS, Meta
from folio.store.records import NewFile, NewRecord, Row, Stamp

__all__ = ["META_KEYS", "Batch", "Damaged", "LockBusy", "Meta", "NewFile", "NewRecord", "NoIndex", "Row", "Stamp",
           "Store", "Vanished", "acquire_lock", "corrupt", "damage_among", "discard", "exists", "held_here", "identity",
           "index_dir", "read_meta", "read_note", "sqlite_damage", "write_note"]
