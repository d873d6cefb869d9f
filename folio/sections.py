"""Markdown text -> heading sections -> embeddable records (DESIGN.md §3).

Owns: decoding bytes, heading sections, dividing to a character budget (frontmatter: frontmatter.py;
the top-level headings: blocks.py).
Must not: touch the filesystem, print, or import click/httpx/numpy; it is pure and hot
(it runs over every file of a corpus), so per-line Python work is kept to boundaries.
"""

from __future__ import annotations

import codecs
import hashlib
from dataclasses import dataclass, replace

from folio import blocks
from folio.frontmatter import _yaml, parse_frontmatter

__all__ = [
    "Document",
    "binary_reason",
    "Section",
    "decode",
    "divide",
    "divide_to_tokens",
    "held_division",
    "parse_document",
    "parse_frontmatter",
    "split_sections",
    "text_hash",
]


@dataclass(frozen=True, slots=True)
class Section:
    start: int  # 1-based inclusive line in the whole file (frontmatter lines counted)
    end: int  # 1-based inclusive; trailing blank lines trimmed
    level: int  # 1-6; 0 for the preamble
    heading: str  # own heading text (inline source); "" for the preamble
    trail: tuple[str, ...]  # enclosing headings, outermost first, own heading last
    text: str  # the record's source lines joined with "\n", "\r" stripped (hashed, read by the lexical
    # plane); the server is sent reader.reader_text(text), the record as a reader sees it
    truncated: bool = False  # a single over-long line was cut to the budget

    def __reduce__(self):  # pickled by a parse worker: as its fields, not the slow generic per-field state
        return Section, (self.start, self.end, self.level, self.heading, self.trail, self.text, self.truncated)


@dataclass(frozen=True, slots=True)
class Document:
    frontmatter: dict
    title: str
    records: tuple[Section, ...]
    warnings: tuple[str, ...]


# --------------------------------------------------------------------------- bytes

_UTF8_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
# C0 controls other than tab, newline, vertical tab, form feed, carriage return and escape (ANSI
# colours in pasted terminal output are text), plus DEL.
_CONTROL = bytes([*range(0, 9), *range(14, 27), *range(28, 32), 127])
_SNIFF = 8192


def binary_reason(raw: bytes) -> str | None:
    """Why these bytes are not Markdown text (a sentence naming the line), or None.

    Looks at the first 8 KB, as git does: a NUL byte in bytes that are not valid UTF-8, or more
    than one byte in twenty a control character, means binary. A valid UTF-8 text with a stray NUL
    is text (decode replaces the NUL); UTF-16 with a byte-order mark is text.
    """
    head = raw[:_SNIFF]
    if not head or head.startswith(_UTF16_BOMS):
        return None
    nul = head.find(b"\x00")
    controls = len(head) - len(head.translate(None, _CONTROL))
    if nul >= 0:
        try:
            codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
        except UnicodeDecodeError:
            line = head.count(b"\n", 0, nul) + 1
            return f"line {line}: binary content (a NUL byte in bytes that are not UTF-8), not Markdown text; skipped"
    if controls * 20 > len(head):
        return (f"binary content ({controls} control bytes in its first {len(head)}), not Markdown text; "
                f"skipped")
    return None


def decode(raw: bytes) -> tuple[str, str | None]:
    """Bytes -> text. Strips a UTF-8 BOM, reads UTF-16 with a BOM; invalid UTF-8 is decoded with
    replacement and NUL becomes U+FFFD (as CommonMark asks), each with a warning sentence naming the
    first line. Line count never changes."""
    warnings = []
    if raw.startswith(_UTF16_BOMS):
        text = raw.decode("utf-16", errors="replace")
        if "\ufffd" in text:
            line = text.count("\n", 0, text.index("\ufffd")) + 1
            warnings.append(f"line {line}: invalid UTF-16; undecodable bytes replaced with U+FFFD")
    else:
        if raw.startswith(_UTF8_BOM):
            raw = raw[3:]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = raw.count(b"\n", 0, exc.start) + 1
            text = raw.decode("utf-8", errors="replace")
            warnings.append(f"line {line}: invalid UTF-8; undecodable bytes replaced with U+FFFD")
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        text = text.replace("\x00", "\ufffd")
        warnings.append(f"line {line}: NUL bytes replaced with U+FFFD")
    return text, "; ".join(warnings) or None


def text_hash(text: str) -> str:
    """Stable content hash of an embedded text: sha256 hex digest of text.encode('utf-8'), first 32 hex chars."""
    # surrogatepass: a lone surrogate (possible in str built by callers) must hash, not crash.
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()[:32]


# ------------------------------------------------------------------------ sections


def warm() -> None:
    """Import and build what parse_document needs (the block parser, yaml) ahead of the first file."""
    blocks.warm()
    _yaml()


def _clean(text: str) -> str:
    """Text whose "\n"-split lines are the file's lines, with "\r" gone.

    markdown-it turns "\r\n" and a lone "\r" into newlines; a lone "\r" would then shift its
    line map against ours. CRLF becomes LF, a line-final "\r" is dropped, any other "\r"
    becomes a space. Character count may change but line count never does.
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\r" not in text:
        return text
    text = text.replace("\r\n", "\n")
    if "\r" in text:
        text = "\n".join(line.rstrip("\r").replace("\r", " ") for line in text.split("\n"))
    return text


def _blank(line: str) -> bool:
    return not line or line.isspace()


# A heading is repeated: its section's heading, the trail of every section under it, their lexical
# heading and trail fields, every --json row. Past this many characters it is cut there (its own
# line, in the section's text, stays whole), so a file's index and answers stay linear in its size.
HEADING_MAX = 300


def short_heading(text: str) -> str:
    """A heading (or title) as it is repeated: at most HEADING_MAX characters, a cut one ending in '…'."""
    return text if len(text) <= HEADING_MAX else text[:HEADING_MAX - 1] + "…"


def _cut_warning(what: str, line: int | None, sizes: list[int]) -> str:
    more = f" (and {len(sizes) - 1} more)" if len(sizes) > 1 else ""
    at = f"line {line}: " if line else ""
    return (f"{at}{what} of {sizes[0]:,} characters{more} is cut to {HEADING_MAX} where it is repeated (headings, "
            f"trails, the lexical plane, --json); the file's text keeps it whole")


def _sections(lines: list[str], skip: int, body: str, cut: list, warnings: list) -> list[Section]:
    """Heading sections of `lines`; the first `skip` lines are frontmatter, `body` is the rest.
    `cut` gets (file line, length) of each heading cut to HEADING_MAX, `warnings` what went wrong."""
    nlines = len(lines)
    heads: list[tuple[int, int, str]] = []  # (0-based file line, level, heading)
    if body.strip():
        heads = [(a + skip, level, text.replace("\n", " ")) for a, level, text in blocks.headings(body, warnings)]

    out: list[Section] = []
    first = heads[0][0] if heads else nlines
    a = skip
    while a < first and _blank(lines[a]):
        a += 1
    if a < first:
        b = first - 1
        while _blank(lines[b]):
            b -= 1
        out.append(Section(a + 1, b + 1, 0, "", (), "\n".join(lines[a : b + 1])))

    stack: list[tuple[int, str]] = []
    for n, (a, level, heading) in enumerate(heads):
        if len(heading) > HEADING_MAX:
            cut.append((a + 1, len(heading)))
            heading = short_heading(heading)
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, heading))
        b = (heads[n + 1][0] if n + 1 < len(heads) else nlines) - 1
        while b > a and _blank(lines[b]):
            b -= 1
        out.append(
            Section(
                a + 1,
                b + 1,
                level,
                heading,
                tuple(h for _, h in stack),
                "\n".join(lines[a : b + 1]),
            )
        )
    return out


def _split(text: str) -> tuple[list[Section], dict, list[str]]:
    frontmatter, skip, warning = parse_frontmatter(text)
    warnings = [warning] if warning else []
    clean = _clean(text)
    lines = clean.split("\n")
    if skip:
        # Hand markdown-it only the body; its line map is then offset by `skip`.
        cut = 0
        for _ in range(skip):
            cut = clean.find("\n", cut) + 1
            if cut == 0:  # the closing line is the last line, with no "\n"
                cut = len(clean)
                break
        body = clean[cut:]
    else:
        body = clean
    cut: list = []
    sections = _sections(lines, skip, body, cut, warnings)
    if cut:
        warnings.append(_cut_warning("a heading", cut[0][0], [n for _, n in cut]))
    return sections, frontmatter, warnings


def split_sections(text: str) -> list[Section]:
    """The undivided heading sections of a whole file's text (frontmatter excluded but counted in numbering)."""
    return _split(text)[0]


# ------------------------------------------------------------------------ dividing


def divide(section: Section, budget: int, cut: bool = True) -> list[Section]:
    """A section whose text is longer than `budget` characters -> consecutive records.

    Greedy: take lines while the piece fits; when a cut is needed, end at the last blank
    line in the piece's second half (a paragraph break), else after the last whole line
    that fits. Blank lines at piece boundaries belong to no record. A single line longer
    than the budget becomes its own record, cut to the budget and marked truncated (with
    cut=False, left whole: divide_to_tokens cuts it only if its tokens need it).
    """
    if budget < 1:
        raise ValueError("budget must be at least one character")
    if len(section.text) <= budget:
        return [section]
    lines = section.text.split("\n")
    n = len(lines)
    first = section.start
    out: list[Section] = []

    def piece(i: int, j: int, text: str, truncated: bool = False) -> Section:
        return replace(section, start=first + i, end=first + j, text=text, truncated=truncated)

    i = 0
    while i < n:
        while i < n and _blank(lines[i]):
            i += 1
        if i >= n:
            break
        if len(lines[i]) > budget:
            out.append(piece(i, i, lines[i][:budget], True) if cut else piece(i, i, lines[i]))
            i += 1
            continue
        size = len(lines[i])
        j = i + 1
        blank_at = -1  # last blank line in the piece, and the piece's length before it
        blank_off = 0
        while j < n:
            grown = size + 1 + len(lines[j])
            if grown > budget:
                break
            if _blank(lines[j]):
                blank_at, blank_off = j, size
            size = grown
            j += 1
        end = j
        # Prefer a paragraph break, unless the next line is over-long anyway (it will
        # stand alone, so everything before it can stay together).
        if j < n and len(lines[j]) <= budget and blank_at > i and blank_off * 2 >= size:
            end = blank_at
        e = end
        while _blank(lines[e - 1]):
            e -= 1
        out.append(piece(i, e - 1, "\n".join(lines[i:e])))
        i = end
    return out


TOKEN_MARGIN = 0.9  # a piece aims this far below the limit: token density varies inside a section
CUT_MARGIN = 0.98  # a single line's density varies less: cut it close to the limit


def divide_to_tokens(section: Section, limit: int, count, ahead=None) -> list[Section]:
    """`section` -> consecutive records of at most `limit` tokens each, `count(text)` counting them
    (the server's tokenizer). A record that fits stays whole; one that does not is divided (as
    `divide` does) at the characters its own token density allows, and any piece still over the
    limit is divided the same way. Only a single line over the limit is cut (marked truncated). The
    result depends on the section's text, the limit and the tokenizer only: never on other records,
    nor on the order they are met in. `ahead(texts)`, if given, is told the pieces' texts before
    each is counted (Session.count_ahead: their counts are asked together)."""
    n = count(section.text)
    if n <= limit or len(section.text) < 2:
        return [section]
    if "\n" not in section.text:
        chars = max(1, min(len(section.text) - 1, int(len(section.text) * limit / n * CUT_MARGIN)))
        return divide_to_tokens(replace(section, text=section.text[:chars], truncated=True), limit, count, ahead)
    chars = max(1, min(len(section.text) - 1, int(len(section.text) * limit / n * TOKEN_MARGIN)))
    out: list[Section] = []
    pieces = divide(section, chars, cut=False)
    if ahead is not None:
        ahead([p.text for p in pieces])
    for piece in pieces:
        out.extend(divide_to_tokens(piece, limit, count, ahead))
    return out


def held_division(records, rows, key) -> list[Section]:
    """`records` as a pass with no server to count tokens plans them: each one whole, unless the
    index holds it divided under the server's token limit (`rows`: the file's records rows, in line
    order; `key(text)`: a record's text_hash) and those pieces still are its text; then those pieces,
    which keep their vectors (given whole, it dropped them, to be embedded again once divided)."""
    held = {r.text_hash for r in rows}
    out: list[Section] = []
    for s in records:
        pieces = None if key(s.text) in held else _held_pieces(s, rows, key)
        out.extend(pieces or (s,))
    return out


def _held_pieces(section: Section, rows, key) -> list[Section] | None:
    """The rows that divide `section` as they still are its text: two or more inside its lines, with
    its heading and trail, none cut, in order and together covering every line of it that is not
    blank, each row's key that of the lines it names now. None when there are no such rows."""
    lines = section.text.split("\n")
    first = section.start
    at, out = 0, []
    for r in rows:
        if r.start < section.start or r.end > section.end or (r.level, r.heading, tuple(r.trail)) != (
                section.level, section.heading, section.trail):
            continue
        i, j = r.start - first, r.end - first + 1
        if r.truncated or i < at or any(not _blank(ln) for ln in lines[at:i]):
            return None
        text = "\n".join(lines[i:j])
        if key(text) != r.text_hash:
            return None
        out.append(replace(section, start=r.start, end=r.end, text=text))
        at = j
    if len(out) < 2 or any(not _blank(ln) for ln in lines[at:]):
        return None
    return out


def parse_document(text: str, budget: int = 8000) -> Document:
    """frontmatter + split + divide, all warnings collected."""
    sections, frontmatter, warnings = _split(text)
    records: list[Section] = []
    for section in sections:
        if len(section.text) <= budget:
            records.append(section)
        else:
            records.extend(divide(section, budget))
    title = frontmatter.get("title")
    if not isinstance(title, str):
        title = next((s.heading for s in sections if s.level == 1), "")
    elif len(title) > HEADING_MAX:  # repeated in every record's lexical fields, as a heading is
        warnings.append(_cut_warning("the frontmatter's title", None, [len(title)]))
        title = short_heading(title)
    return Document(
        frontmatter=frontmatter,
        title=title,
        records=tuple(records),
        warnings=tuple(warnings),
    )
