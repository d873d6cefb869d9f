"""Unpack the shared Markdown corpora (../shared/corpora/<name>.tar.gz) for benchmarks.

No pytest dependency; tests/helpers.py loads this file too, so tests and benchmarks
unpack the same way. Each tarball holds one top directory named like the tarball
(``rust-book/``, ``eips/``, ``keps/``, ``md-history/``) with a PROVENANCE.txt; that
top directory is the corpus root and is what ``unpack`` returns.

    python bench/corpora.py rust-book            # prints /tmp/folio-bench/rust-book
    python bench/corpora.py md-2m                # builds /tmp/folio-bench/md-2m (see build_md2m)

``md-2m`` is not a tarball: it is four copies of md-history (64,052 files, ~1.9M sections) whose
headings are made distinct per copy, so no copy's sections reuse another copy's vectors and each
copy is embedded as its own (about 1.3M embedded sections; md-history's own revisions still share).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPORA_DIR = Path(os.environ.get("FOLIO_CORPORA_DIR") or REPO.parent / "shared" / "corpora")
NAMES = ("rust-book", "eips", "keps", "md-history")
BUILT = ("md-2m",)  # corpora made from the tarballs' corpora, not unpacked (build())
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
        _into_place(_top_dir(tmp, name), dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def _into_place(built: Path, dest: Path) -> None:
    """Rename a finished tree to `dest` in one step; a concurrent builder that got there first wins."""
    try:
        os.rename(built, dest)
    except OSError:
        if not dest.is_dir():
            raise


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


_HEADING = re.compile(rb"^( {0,3}#{1,6}[ \t]+)(.*?)([ \t]+#+)?[ \t]*$")
_FENCE = re.compile(rb"^ {0,3}(`{3,}|~{3,})")


def distinct_headings(data: bytes, tag: bytes) -> bytes:
    """`data` (a Markdown file) with `tag` appended to every ATX heading outside fenced code.

    Every section that starts with a heading then has a text (and a key, batch.record_key) no
    other copy has; a file's preamble and the later pieces of a divided section keep their text.
    """
    out: list[bytes] = []
    closing = None
    for line in data.split(b"\n"):
        if closing is not None:
            if closing.match(line):
                closing = None
        else:
            m = _FENCE.match(line)
            if m:
                run = m.group(1)
                closing = re.compile(rb" {0,3}" + re.escape(run[:1]) + rb"{%d,}[ \t]*\r?$" % len(run))
            else:
                h = _HEADING.match(line.rstrip(b"\r"))
                if h:
                    cr = b"\r" if line.endswith(b"\r") else b""
                    line = h.group(1) + h.group(2) + tag + cr
        out.append(line)
    return b"\n".join(out)


def build_md2m(dest: Path | str | None = None, copies: int = 4) -> Path:
    """Four copies of md-history at dest (default /tmp/folio-bench/md-2m), headings distinct per copy.

    Copy k is dest/copy<k>/ (md-history's tree); copy 0 is md-history as it is, copy k > 0 has
    " (copy k)" appended to each heading. Built in a temporary sibling and renamed into place in one
    step, so an existing dest is complete (and is returned untouched). Never index dest itself:
    benchmarks that write work on a hard-linked copy (cp -al) and replace, not edit, the files
    they change.
    """
    dest = Path(dest) if dest is not None else DEFAULT_BASE / "md-2m"
    if dest.is_dir():
        return dest
    src = unpack("md-history")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.build-", dir=dest.parent))
    try:
        files = markdown_files(src)
        for k in range(copies):
            tag = f" (copy {k})".encode() if k else b""
            top = tmp / f"copy{k}"
            for p in files:
                target = top / p.relative_to(src)
                target.parent.mkdir(parents=True, exist_ok=True)
                data = p.read_bytes()
                target.write_bytes(distinct_headings(data, tag) if tag else data)
        (tmp / "PROVENANCE.txt").write_text(
            f"{copies} copies of md-history (bench/corpora.py build_md2m): copy<k>/ is md-history with\n"
            f"' (copy k)' appended to every ATX heading outside fenced code (copy0 unchanged).\n\n"
            + provenance(src), encoding="utf-8")
        _into_place(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def build(name: str) -> Path:
    """A corpus by name: a tarball's (unpack) or one made from them (BUILT)."""
    return build_md2m() if name == "md-2m" else unpack(name)


if __name__ == "__main__":
    for arg in sys.argv[1:] or NAMES:
        print(build(arg))
