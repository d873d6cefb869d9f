"""Property tests on sections and dividing, for any text (tests/test_sections.py holds the
hand-written cases and the basic order/cover property; these add what a user relies on when a
range is handed out: every record's text IS the file's lines at that range, trails follow the
heading levels, headings survive any nesting, frontmatter of any shape never raises, and dividing
never loses or invents a line)."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from folio.sections import (
    Section,
    decode,
    divide,
    parse_document,
    parse_frontmatter,
    split_sections,
)

FAST = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def file_lines(text: str) -> list[str]:
    """The file's lines as folio must number them: split on "\\n" only; a BOM is not content;
    a line's trailing "\\r"s are its line ending, any other "\\r" is a space."""
    text = text.removeprefix("\ufeff")
    return [ln.rstrip("\r").replace("\r", " ") for ln in text.split("\n")]


def blank(line: str) -> bool:
    return not line.strip()  # Unicode whitespace only (NBSP, U+2028 ...) holds nothing to index


# ------------------------------------------------------------------ strategies

words = st.text(alphabet=st.sampled_from("abcxyz019 _*`[]()<>!#-=~|\\\t"), max_size=12)
odd = st.sampled_from(["\x00", "\u2028", "\x85", "\x0c", "\ufeff", "\r", "\t", "é", "𝄞", "\u200b"])
inline = st.lists(words | odd, max_size=4).map("".join)


@st.composite
def block(draw, closed: bool = False) -> list[str]:
    """A few lines of one Markdown construct; `closed`: fences and comments always end."""
    kind = draw(st.integers(0, 13))
    t = draw(inline)
    if closed:  # no stray fence or HTML opener inside the text itself
        t = re.sub(r"[`~<]", "", t)
    if kind == 0:
        return [draw(st.integers(1, 7)) * "#" + draw(st.sampled_from([" ", "", "  "])) + t]
    if kind == 1:
        return [t or "x", draw(st.sampled_from(["===", "---", "= =", "-- -"]))]
    if kind == 2:
        fence = draw(st.sampled_from(["```", "~~~", "````"]))
        inner = ["# not a heading", t, ""] + ([] if closed else ["```", "~~~"])
        body = draw(st.lists(st.sampled_from(inner), max_size=4))
        close = fence if closed else draw(st.sampled_from([fence, "", "~~~"]))
        return [fence + draw(st.sampled_from(["", "py"])), *body, close]
    if kind == 3:
        return ["<!--", draw(st.sampled_from(["# hidden", t])), "-->" if closed else draw(st.sampled_from(["-->", ""]))]
    if kind == 4:
        depth = draw(st.integers(1, 60))
        return ["  " * i + "- " + t for i in range(depth)]
    if kind == 5:
        depth = draw(st.integers(1, 60))
        return [">" * draw(st.integers(1, depth)) + " " + t for _ in range(draw(st.integers(1, 4)))]
    if kind == 6:
        return ["> - " * draw(st.integers(1, 50)) + t]
    if kind == 7:
        return ["    # indented " + t]
    if kind == 8:
        return [""] * draw(st.integers(1, 3))
    if kind == 9:
        return ["   " * draw(st.integers(0, 3)) + "1. " + t]
    if kind == 10:
        return ["<div>", t or "x", "</div>"] if closed else ["<div>", t, "</div>"]
    if kind == 11:
        return ["x" * draw(st.integers(50, 400))]
    return [t]


@st.composite
def markdown(draw) -> str:
    lines: list[str] = []
    if draw(st.booleans()):
        fm = draw(st.lists(st.sampled_from(["title: T", "a: [1, 2", "- x", "k: {a: b}", "date: 2025-30-01",
                                            "just text", "x: !!python/object/apply:os.system ['true']",
                                            "q: 'open", "n:", "  nested: 1", "&a [*a]", ""]), max_size=5))
        closing = draw(st.sampled_from(["---", "...", "--- ", ""]))
        lines += ["---", *fm] + ([closing] if closing else [])
    for b in draw(st.lists(block(), max_size=12)):
        lines += b
    text = draw(st.sampled_from(["\n", "\r\n"])).join(lines)
    if draw(st.booleans()):
        text += "\n"
    if draw(st.integers(0, 9)) == 0:
        text = "\ufeff" + text
    return text


# ------------------------------------------------------------------ properties


def check_records(text: str, budget: int) -> None:
    lines = file_lines(text)
    n = len(lines) - (1 if text.endswith("\n") else 0)
    _fm, fm_lines, _w = parse_frontmatter(text)
    doc = parse_document(text, budget)
    prev = fm_lines
    covered = set()
    for r in doc.records:
        assert prev < r.start <= r.end <= max(n, 1), (r.start, r.end, prev, n)  # ordered, disjoint, inside
        prev = r.end
        assert len(r.text) <= budget
        got = lines[r.start - 1:r.end]
        if r.truncated:
            assert r.start == r.end and len(got[0]) > budget and r.text == got[0][:budget]
        else:
            assert r.text == "\n".join(got), f"record {r.start}-{r.end} text differs from the file's lines"
        # ranges are trimmed to content (a heading's own line may be only Unicode spaces)
        assert not blank(got[0]) or r.level > 0
        assert not blank(got[-1]) or r.start == r.end
        covered.update(range(r.start, r.end + 1))
    for i in range(fm_lines + 1, n + 1):
        assert i in covered or blank(lines[i - 1]), f"line {i} {lines[i - 1]!r} lost"


@FAST
@given(text=markdown(), budget=st.integers(20, 400))
def test_markdown_shaped_text_gives_exact_ranges(text, budget):
    check_records(text, budget)


@FAST
@given(text=st.text(max_size=400), budget=st.integers(1, 200))
def test_any_unicode_text_gives_exact_ranges(text, budget):
    check_records(text, budget)


@FAST
@given(raw=st.binary(max_size=300))
def test_any_bytes_decode_without_changing_line_count(raw):
    text, _warning = decode(raw)
    if not raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        assert text.count("\n") == raw.count(b"\n")
    assert "\x00" not in text
    parse_document(text, 100)  # never raises


@FAST
@given(text=markdown())
def test_trails_follow_heading_levels(text):
    lines = file_lines(text)
    stack: list[tuple[int, str]] = []
    for i, s in enumerate(split_sections(text)):
        if s.level == 0:
            assert i == 0 and s.heading == "" and s.trail == ()
            continue
        assert 1 <= s.level <= 6
        while stack and stack[-1][0] >= s.level:
            stack.pop()
        stack.append((s.level, s.heading))
        assert s.trail == tuple(h for _, h in stack)
        first = lines[s.start - 1]
        atx = re.match(r" {0,3}(#{1,6})(?:[ \t]|$)", first)
        if atx:
            assert len(atx.group(1)) == s.level
        else:  # setext: an underline of the level's character closes the heading inside the range
            mark = "=" if s.level == 1 else "-"
            under = [ln.strip() for ln in lines[s.start - 1:s.end]]
            assert any(u and set(u) == {mark} for u in under[1:]), (s, under)


@FAST
@given(prefix=st.lists(block(closed=True), max_size=6), budget=st.integers(50, 500))
def test_a_top_level_heading_survives_any_nesting_before_it(prefix, budget):
    body = [ln for b in prefix for ln in [*b, ""]]  # a blank line ends an HTML block before a fence
    text = "\n".join([*body, "", "# Survivor", "", "text"]) + "\n"
    doc = parse_document(text, budget)
    n = text.count("\n")
    last = doc.records[-1]
    assert (last.heading, last.start, last.end) == ("Survivor", n - 2, n)


@FAST
@given(block_lines=st.lists(st.text(alphabet=st.sampled_from("ab:-[]{}!&*'\"|>%@`#,? \t\\"), max_size=20),
                            max_size=8))
def test_frontmatter_of_any_shape_never_raises(block_lines):
    text = "---\n" + "\n".join(block_lines) + "\n---\n# After\n\nbody\n"
    fm, n, warning = parse_frontmatter(text)
    assert isinstance(fm, dict)
    # `---` then a blank line over no YAML mapping: a thematic break opening the text, not frontmatter
    thematic = n == 0 and fm == {} and bool(block_lines) and not block_lines[0].strip()
    if warning is None:
        assert n == max(len(block_lines), 1) + 2 or {"---", "..."} & set(block_lines) or thematic
    else:
        m = re.match(r"line (\d+): ", warning)
        assert m and 1 <= int(m.group(1)) <= n
    doc = parse_document(text)
    # read as Markdown (the thematic break), a fence the block opens runs to the end: no heading after it
    fenced = thematic and any(re.match(r" {0,3}```", ln) for ln in block_lines)
    assert doc.records and (doc.records[-1].heading == "After" or fenced)


@FAST
@given(lines=st.lists(st.text(alphabet=st.sampled_from("ab \t"), max_size=60), min_size=1, max_size=30),
       budget=st.integers(1, 80), start=st.integers(1, 1000))
def test_dividing_respects_the_budget_and_never_loses_a_line(lines, budget, start):
    text = "\n".join(lines)
    section = Section(start, start + len(lines) - 1, 2, "H", ("T", "H"), text)
    pieces = divide(section, budget)
    covered = set()
    prev = start - 1
    for p in pieces:
        assert prev < p.start <= p.end <= section.end
        prev = p.end
        assert len(p.text) <= budget
        assert (p.level, p.heading, p.trail) == (2, "H", ("T", "H"))
        own = lines[p.start - start:p.end - start + 1]
        if p.truncated:
            assert p.start == p.end and len(own[0]) > budget and p.text == own[0][:budget]
        else:
            assert p.text == "\n".join(own)
        covered.update(range(p.start, p.end + 1))
    for i, line in enumerate(lines):
        if line.strip():
            assert start + i in covered
    if len(text) <= budget:
        assert pieces == [section]


@FAST
@given(text=markdown(), window=st.integers(1, 80))
def test_a_body_read_a_window_at_a_time_has_the_headings_read_whole(text, window):
    """A big body is parsed in windows (folio/blocks.py, WINDOW): each starts at the last top-level
    heading the one before found, so the sections are those of the body read at once."""
    from folio import blocks

    whole = parse_document(text, 10_000)
    held = blocks.WINDOW
    blocks.WINDOW = window
    try:
        windowed = parse_document(text, 10_000)
    finally:
        blocks.WINDOW = held
    assert windowed == whole
