"""Unpack the shared Markdown corpora (../shared/corpora/<name>.tar.gz) for benchmarks.

No pytest dependency; tests/helpers.py loads this file too, so tests and benchmarks
unpack the same way. Each tarball holds one top directory named like the tarball
(``rust-book/``, ``eips/``, ``keps/``, ``md-history/``) with a PROVENANCE.txt; that
top directory is the corpus root and is what ``unpack`` returns.

    python bench/corpora.py rust-book            # prints /tmp/folio-bench/rust-book
"""

from __future__ import annotations

import os
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPORA_DIR = Path(os.environ.get("FOLIO_CORPORA_DIR") or REPO.parent / "shared" / "corpora")
NAMES = ("rust-book", "eips", "keps", "md-history")
DEFAULT_BASE = Path("/tmp/folio-bench")


def tarball(name: str) -> Path:
    return CORPORA_DIR / f"{name}.tar.gz"


def _top_dir(extracted: Path, name: str) -> Path:
    """The directory inside an extraction that holds the corpus (PROVENANCE.txt)."""
    cand = extracted / name
    if cand.is_dir():
        return cand
    for p in sorted(extracted.rglob("PROVENANCE.txt")):
        return p.parent
    entries = [p for p in extracted.iterdir() if not p.name.startswith(".")]
    if len(entries) == 1 and entries[0].is_dir():
        return entries[0]
    return extracted


def unpack(name: str, dest: Path | str | None = None) -> Path:
    """Unpack corpus `name` so that `dest` (default /tmp/folio-bench/<name>) is its root.

    Idempotent and safe against concurrent callers: extraction goes to a temporary
    sibling directory which is renamed into place in one step, so an existing `dest`
    is always complete and is returned untouched.
    """
    dest = Path(dest) if dest is not None else DEFAULT_BASE / name
    if dest.is_dir():
        return dest
    src = tarball(name)
    if not src.is_file():
        raise FileNotFoundError(f"corpus tarball not found: {src}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.unpack-", dir=dest.parent))
    try:
        with tarfile.open(src) as tf:
            try:
                tf.extractall(tmp, filter="data")
            except TypeError:  # Python without extraction filters
                tf.extractall(tmp)  # noqa: S202 - our own tarballs
        top = _top_dir(tmp, name)
        try:
            os.rename(top, dest)
        except OSError:
            if not dest.is_dir():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def provenance(root: Path | str) -> str:
    p = Path(root) / "PROVENANCE.txt"
    return p.read_text(encoding="utf-8") if p.is_file() else ""


def markdown_files(root: Path | str, exts: tuple[str, ...] = (".md",)) -> list[Path]:
    """All Markdown files under root, sorted by relative path (deterministic)."""
    root = Path(root)
    out = [p for p in root.rglob("*") if p.suffix in exts and p.is_file()]
    return sorted(out, key=lambda p: p.relative_to(root).as_posix())


def first_n_files(root: Path | str, n: int, exts: tuple[str, ...] = (".md",)) -> list[Path]:
    """The first n Markdown files under root in sorted relative-path order."""
    return markdown_files(root, exts)[:n]


def subset(root: Path | str, n: int, dest: Path | str) -> Path:
    """Copy the first n Markdown files of root (keeping relative paths) into dest."""
    root, dest = Path(root), Path(dest)
    for p in first_n_files(root, n):
        target = dest / p.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(p, target)
    return dest


if __name__ == "__main__":
    for arg in sys.argv[1:] or NAMES:
        print(unpack(arg))
