"""The index's meta table (`meta(key, value)` in index.db), read typed and written by field name.

Owns the keys the table may hold (Meta's fields, the format version FORMAT), how each stored text
reads (a numeric key that is not a whole number is damage, one sentence; an endpoint recorded with
credentials is read without them) and how a value is stored (str(value); None stores NULL, which
reads as unset). Callers name the fields they write as keywords (`store.set_meta(refit=None)`): a
name that is no field is refused before anything is written. Must not decode the space's own fields
(fingerprint, roles, tokens: space.py does) or decide when anything is written (the Store does).
"""

from __future__ import annotations

import sqlite3
from collections import namedtuple
from pathlib import Path

from folio.errors import FolioError
from folio.store.directory import corrupt

FORMAT = 1

_NUMERIC_META = ("dim", "rows", "gen", "budget", "format")


def _number(value: str | None) -> int | None:
    return int(value) if value else None


def _number_or_none(value: str | None) -> int | None:
    """A number where a whole number is recorded, None where anything else is (never refused)."""
    return int(value) if value is not None and value.isascii() and value.isdigit() else None


# stored: key -> the stored text, as read; dim: the vectors' dimension (None before a space is
# recorded); rows: rows of the matrix file; gen: the matrix file's generation (vectors.<gen>.f32);
# budget: the section budget (characters) the records were divided at; endpoint: without credentials
# (never printed, never sent); tokens: the server's token limit (None unless a whole number is
# recorded); text: the record-text version (reader.VERSION) the vectors were embedded from; refit:
# files divided under another token limit remain; unfinished: the files a full run walked, until its
# final commit clears it; slotmap: the slot map is kept; loose: the generation of a matrix file folio
# made that is not the current one (being written, or replaced and about to be removed): recovery
# removes vectors.<loose>.f32, and no other file it does not name; analysis: the lexical analysis
# version (analysis.ANALYSIS_VERSION) the segments were built under (None: version 1, see reanalyse.py).
# where: the index.db it was read from, no key of the table (a field space.py finds damaged names its index).
_MetaFields = namedtuple("Meta", "stored format created dim rows gen budget endpoint endpoint_source model fingerprint "
                                 "roles tokens tokens_from text refit unfinished slotmap loose analysis where",
                         defaults=(None, None, None, None, 0, 0, None, None, None, None, None, None, None, None, None,
                                   False, None, False, None, None, None))


class Meta(_MetaFields):
    """An index's meta table, typed: read once (Store.reload_meta) and after each write, so no caller
    parses its text. The space's own fields keep their stored form for space.py to decode
    (space.fingerprint: the hex of little-endian float32; space.recorded_roles: JSON;
    space.Tokens.recorded: the token limit and where it was learned)."""

    __slots__ = ()

    def __new__(cls, stored: dict | None = None, *args, **kwargs):
        return super().__new__(cls, {} if stored is None else stored, *args, **kwargs)

    @classmethod
    def parse(cls, stored: dict, where: Path | None = None) -> Meta:
        """From the meta table's rows (read() has refused a numeric key that is not a number) of the
        index.db at `where`."""
        g = stored.get
        return cls(dict(stored), _number(g("format")), g("created"), _number(g("dim")), int(g("rows") or 0),
                   int(g("gen") or 0), _number(g("budget")), g("endpoint"), g("endpoint_source"), g("model"),
                   g("fingerprint"), g("roles"), _number_or_none(g("tokens")), g("tokens_from"), g("text"),
                   bool(g("refit")), _number_or_none(g("unfinished")), g("slotmap") == "1",
                   _number_or_none(g("loose")), g("analysis"), where)

    def only(self, keys) -> Meta:
        """This meta with only `keys` (those recorded): what `folio doctor` shows and judges by."""
        return Meta.parse({k: self.stored[k] for k in keys if self.stored.get(k)}, self.where)


META_KEYS = frozenset(Meta._fields) - {"stored", "where"}


def check_keys(values: dict) -> None:
    """Refuse a write naming anything but Meta's fields (a caller's mistake, never the user's)."""
    unknown = set(values) - META_KEYS
    if unknown:
        raise FolioError(f"internal: no meta key {sorted(unknown)}")


def read(conn: sqlite3.Connection, db: Path) -> dict[str, str | None]:
    """The meta table's stored texts (empty before the table exists), checked: a numeric key that is
    not a whole number is damage; an endpoint recorded with `user:password@` is read without them."""
    try:
        stored = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    except sqlite3.OperationalError:
        stored = {}
    except sqlite3.DatabaseError as e:
        raise corrupt(db, str(e)) from None
    for key, value in stored.items():  # every value is text (or NULL): a blob from a hand edit is damage
        if not isinstance(key, str) or not isinstance(value, str | None):
            raise corrupt(db, f"meta `{key}` is {value!r:.40}, not text")
    endpoint = stored.get("endpoint")
    if endpoint and "@" in endpoint:  # recorded with credentials (an older folio, or a planted .folio/)
        from folio.config import strip_userinfo

        stored["endpoint"] = strip_userinfo(endpoint, "")  # never printed, never sent
    for key in _NUMERIC_META:  # read as numbers: a hand edit must not become a traceback
        value = stored.get(key)
        if value is not None and not (value.isascii() and value.isdigit()):
            raise corrupt(db, f"meta `{key}` is {value!r}, not a whole number")
    return stored


def write(conn: sqlite3.Connection, stored: dict[str, str | None], values: dict[str, object],
          where: Path | None = None) -> Meta:
    """Write `values` (field -> value; None unsets one) inside the caller's transaction, update
    `stored` to match, and return the meta they make (of the index.db at `where`)."""
    check_keys(values)
    conn.executemany(
        "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
        [(k, None if v is None else str(v)) for k, v in values.items()],
    )
    for k, v in values.items():
        stored[k] = None if v is None else str(v)
    return Meta.parse(stored, where)
