"""The text of a record as its reader sees it: what folio sends to the embeddings server.

A record is stored and cited by its source lines, but markup a reader never sees — HTML comments
and tags, link targets and reference labels, reference definitions, `{{#include ...}}`
directives, heading markers — is noise to a model that averages every token of its input. On
rust-book with all-MiniLM-L6-v2, the sentence "you can declare a new variable with the same name
as a previous variable" scores 0.82 against a question in other words; buried in its source line
(`[Chapter\\n2][comparing-the-guess-to-the-secret-number]<!-- ignore -->, you can declare ...`)
its paragraph scores 0.30 (bench/quality_variants.py measures the whole effect).

Code is content: fenced blocks and inline code spans are kept as written (only a fence whose
body was nothing but a directive goes). Pure, and only `re`: cheap enough to run on every record
sent. `VERSION` is recorded in the index; a change of this function re-embeds every section.
"""

from __future__ import annotations

import re

VERSION = "reader-1"

_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.S)
_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>`]*)?/?>")
_IMAGE = re.compile(r"!\[([^\]\n]*)\]\([^)\n]*\)")
_LINK = re.compile(r"\[([^\]]+)\](?:\([^)\n]*\)|\[[^\]\n]*\])")
_REFDEF = re.compile(r"^ {0,3}\[[^\]\n]+\]:[ \t]*\S.*$", re.M)
_DIRECTIVE = re.compile(r"\{\{#[^}\n]*\}\}")
_HEADMARK = re.compile(r"^ {0,3}#{1,6}(?:[ \t]+|$)", re.M)
_CODESPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)", re.S)
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_BLANKS = re.compile(r"\n{3,}")
_TRIGGER = re.compile(r"[<\]#]|\{\{#")


def _prose(text: str) -> str:
    """Markup out of prose, inline code spans untouched."""
    if not _TRIGGER.search(text):
        return text
    if "`" not in text:
        return _strip(text)
    out, at = [], 0
    for m in _CODESPAN.finditer(text):
        out.append(_strip(text[at:m.start()]))
        out.append(m.group(0))
        at = m.end()
    out.append(_strip(text[at:]))
    return "".join(out)


def _strip(text: str) -> str:
    if "<" in text:
        text = _TAG.sub("", _COMMENT.sub("", text)) if "<!--" in text else _TAG.sub("", text)
    if "]" in text:
        if "]:" in text:
            text = _REFDEF.sub("", text)
        if "![" in text:
            text = _IMAGE.sub(r"\1", text)
        if "](" in text or "][" in text:
            text = _LINK.sub(r"\1", text)
    if "{{#" in text:
        text = _DIRECTIVE.sub("", text)
    if "#" in text:
        text = _HEADMARK.sub("", text)
    return text


def reader_text(text: str) -> str:
    """`text` (a record's source lines) as a reader sees it; the source itself when nothing is left."""
    if not _TRIGGER.search(text):
        return text
    if "```" not in text and "~~~" not in text:
        return _BLANKS.sub("\n\n", _prose(text)).strip() or text
    parts: list[str] = []
    prose: list[str] = []
    fence: list[str] = []
    closing = None
    for line in text.split("\n"):
        if closing is not None:
            fence.append(line)
            if closing.match(line):
                parts.append(_fence(fence, closed=True))
                fence, closing = [], None
            continue
        m = _FENCE.match(line)
        if m:
            parts.append(_prose("\n".join(prose)))
            prose = []
            run = m.group(1)
            closing = re.compile(rf" {{0,3}}{re.escape(run[0])}{{{len(run)},}}[ \t]*$")
            fence = [line]
        else:
            prose.append(line)
    parts.append(_prose("\n".join(prose)) if closing is None else _fence(fence, closed=False))
    out = _BLANKS.sub("\n\n", "\n".join(p for p in parts if p)).strip()
    return out or text


def _fence(lines: list[str], closed: bool) -> str:
    """A fenced block as written, directive lines dropped; nothing when that leaves it empty."""
    body = [_DIRECTIVE.sub("", line) for line in (lines[1:-1] if closed else lines[1:])]
    if not any(line.strip() for line in body):
        return ""
    return "\n".join([lines[0], *body, *(lines[-1:] if closed else [])])
