"""Which lines of a Markdown body are its top-level headings: the two block parsers, and a big
body read a window at a time.

Owns the choice of parser for a text (markdown-it.rs where it agrees with markdown-it-py, else
markdown-it-py), their set-up, and WINDOW: a body longer than it is parsed in windows, each one
starting at the last top-level heading the window before it found, so the parser's memory (~35
bytes per byte of text) follows the window, not the file. Must not touch the filesystem, print, or
import click/httpx/numpy; it is pure and hot (sections.py calls it for every file read).
"""

from __future__ import annotations

import re

WINDOW = 1 << 20  # characters of a body the block parser reads at once (a 1 MB window: ~35 MB)


def headings(body: str, warnings: list) -> list[tuple[int, int, str]]:
    """(0-based line of `body`, level, text) of each top-level heading: a "# x" inside a blockquote
    or list item is part of that block, not a document section; code and HTML blocks never yield one.

    A body over WINDOW characters is read a window at a time. Where a window finds a top-level
    heading, every block before it is closed, and the block parse reads each line knowing only the
    lines before it (a setext underline reaches back to its own paragraph alone): so the headings a
    window finds before its last one are the whole body's, and the next window starts at that last
    one, as at the start of a document. A window finding none past its first line is doubled (one
    long code block, say: at worst the rest of the body at once, as without windows); a parser that
    fails on a window reads the whole body instead, as before. Every window is read by the parser
    the whole body takes (_choice), so the two parsers' rare differences cannot tell them apart."""
    body = body.replace("\0", "\ufffd")  # (as markdown-it-py's normalize does: lines unchanged)
    choice = _choice(body)
    if len(body) <= WINDOW:
        return _whole(body, warnings, choice)
    out: list[tuple[int, int, str]] = []
    at = line = 0  # where the window starts in the body: its character and its line
    size = WINDOW
    while True:
        end = len(body) if at + size >= len(body) else body.rfind("\n", at, at + size) + 1
        if end <= at:  # no line ends inside the window: take a larger one
            size *= 2
            continue
        failed: list = []
        got = _whole(body[at:end], failed, choice)
        if failed:
            return _whole(body, warnings, choice)
        if end == len(body):
            return out + [(line + a, level, text) for a, level, text in got]
        if not got or got[-1][0] == 0:  # no heading past the window's first line: read more at once
            size *= 2
            continue
        last = got[-1][0]
        out += [(line + a, level, text) for a, level, text in got[:-1]]
        for _ in range(last):  # the last heading's line is where the next window starts
            at = body.index("\n", at) + 1
        line += last
        size = WINDOW

_md = None


def warm() -> None:
    """Import and build the block parser ahead of the first file."""
    if not _rust():
        _parser()


# Two block parsers: markdown-it.rs (markdown_it_pyrs, compiled, ~5x faster) and markdown-it-py. On
# every file of the shared corpora (eips, keps, rust-book, md-history: 17,750 files) they find the
# same top-level headings (line, level, text). On generated documents they part in three rare
# constructs, where markdown-it-py agrees with the CommonMark reference (commonmark.js): an empty
# list item ("-" or "2)" alone, also a one-character setext underline), a reference definition with
# nothing after its colon, and a line right after a blockquote line that does not continue it (a lazy
# line). A file holding any of them is read by markdown-it-py (~13% of the corpora's bytes), as is
# one with nesting deep enough to exhaust the compiled parser's stack (a line of 50,000 "- " ends the
# process) or deep enough that markdown-it-py reads lines as opaque (_deep_line), text it cannot be
# handed (lone surrogates), and every file where markdown_it_pyrs is not installed.
_rs = None
_BLOCK_RULES = ["blockquote", "code", "fence", "heading", "hr", "html_block", "lheading", "list", "paragraph",
                "reference"]  # markdown-it-py's "commonmark" block rules; no inline parsing
_PARTING = re.compile(r"\n[ \t>]*(?:[-+*]|\d{1,9}[.)])[ \t]*\n"  # an empty list item
                      r"|\n[ \t>]*\[[^\]\n]*\]:[ \t]*\n"  # a reference definition's label alone
                      # a line after a blockquote line (its ">" led by container markers only), not one
                      r"|\n[ \t]*(?:(?:>|[-+*][ \t]|\d{1,9}[.)][ \t])[ \t]*)*>[^\n]*\n[ \t]*[^\s>]")
# Each level of nesting is opened on a line of its own whose leading markers and indentation reach
# it (a lazy line continues a paragraph, never opens a container). Where such a run is _PREFIX_MAX
# columns or more (a tab counted as 4), markdown-it-py reads the file: its token levels stay under
# _DEEP below that. (Matched from 8 characters on; each line is "\n"-led, the body too.)
_PREFIX = re.compile(r"\n(?=[ \t>*+\-0-9.)]{8})[ \t]*(?:(?:>|[-+*][ \t]|\d{1,9}[.)][ \t])[ \t]*)+")
_PREFIX_MAX = 32
_SURROGATE = re.compile("[\ud800-\udfff]")
# A run of reference definitions on consecutive lines takes the compiled parser time quadratic in its
# length (1,000 lines ~20 ms, 4,000 ~0.3 s, 40,000 ~36 s: a generated link list); markdown-it-py's is
# linear and as fast at 1,000. A file holding a run of _REF_RUN or more is read by markdown-it-py.
_REF_RUN = 512
_REF_RUN_RE = re.compile(r"(?:\n {0,3}\[[^\]\n]+\]:[^\n]*){" + str(_REF_RUN) + "}")


def _rust():
    global _rs
    if _rs is None:
        try:
            import markdown_it_pyrs
        except ImportError:
            _rs = False
        else:
            md = markdown_it_pyrs.MarkdownIt("zero")
            md.enable_many(_BLOCK_RULES)
            _rs = md
    return _rs


def _choice(body: str) -> str:
    """Which parser reads `body`: "rs" (the compiled one), "py" (markdown-it-py, the compiled one
    where it fails) or "py alone" (where the compiled one is not installed or cannot read it)."""
    if not _rust():
        return "py alone"
    led = "\n" + body + "\n"
    if any(len(p) + 3 * p.count("\t") > _PREFIX_MAX for p in _PREFIX.findall(led)) or \
            not body.isascii() and _SURROGATE.search(body):
        return "py alone"  # (its stack, or text it cannot be handed)
    if not _PARTING.search(led) and not (body.count("]:") >= _REF_RUN and _REF_RUN_RE.search(led)):
        return "rs"
    return "py"


def _whole(body: str, warnings: list, choice: str) -> list[tuple[int, int, str]]:
    """headings() of a body read at once, by the parser `choice` names (_choice)."""
    if choice == "rs":
        return _headings_rs(_rust(), body)
    try:
        tokens = _parser().parse(body)
    except Exception as e:  # noqa: BLE001 - markdown-it-py fails on a few nestings (IndexError in getLines)
        if choice == "py":
            return _headings_rs(_rust(), body)
        warnings.append(f"the Markdown parser failed on this file ({type(e).__name__}: {e}), so it is one "
                        "section with its headings unread; simplify its nested lists and block quotes")
        return []
    return [(tok.map[0], int(tok.tag[1]), tokens[i + 1].content if i + 1 < len(tokens) else "")
            for i, tok in enumerate(tokens) if tok.type == "heading_open" and tok.level == 0 and tok.map is not None]


def _headings_rs(rs, body: str) -> list[tuple[int, int, str]]:
    raw = body.encode("utf-8")  # (srcmap: byte offsets)
    out, line, at = [], 0, 0
    for node in rs.tree(body).children:
        if node.name == "heading" or node.name == "lheading":
            start = node.srcmap[0]
            line += raw.count(b"\n", at, start)
            at = start
            text = node.children[0].meta.get("content", "") if node.children else ""
            out.append((line, node.meta["level"], text.strip()))  # (as markdown-it-py strips: \f too)
    return out


def _parser():
    global _md
    if _md is None:
        from markdown_it import MarkdownIt  # imported lazily: keeps `folio --help` fast

        md = MarkdownIt("commonmark", {"maxNesting": _MAX_NESTING})
        # Block structure is all we need; headings' inline tokens keep .content anyway.
        md.core.ruler.disable(["inline", "text_join"])
        first = md.block.ruler.get_all_rules()[0]
        md.block.ruler.before(first, "folio_deep", _deep_line)
        _quiet_block_rules()
        _md = md
    return _md


# markdown-it stops parsing when lists and block quotes nest past maxNesting: it skips to the
# end of the enclosing range, which is the end of the file, so every heading after ten nested
# list levels vanished. Past _DEEP levels folio reads each line as opaque text instead: the
# containers still end where their indentation ends, and the file's own headings are found.
_MAX_NESTING = 40
_DEEP = _MAX_NESTING - 4  # a list opens two levels before its items are tokenised


def _deep_line(state, start: int, end: int, silent: bool) -> bool:
    if state.level < _DEEP:
        return False
    state.line = start + 1
    return True


class _Silent:
    """Stands in for the loggers of markdown-it's block rules: each rule logs its every call at
    DEBUG, which folio never shows, and those calls were 8-13% of a parse's CPU time.
    (An empty string's format ignores its arguments, at C speed.)"""

    __slots__ = ()
    debug = "".format


def _quiet_block_rules() -> None:
    import importlib
    import pkgutil

    import markdown_it.rules_block as rules

    for info in pkgutil.iter_modules(rules.__path__):
        mod = importlib.import_module(f"{rules.__name__}.{info.name}")
        if hasattr(getattr(mod, "LOGGER", None), "debug"):
            mod.LOGGER = _Silent()
