"""Unit tests for folio.sections: tiny inline Markdown, golden checks on real corpora,
and property tests. Everything here is pure: no CLI, no network, no writes to the repo."""

from __future__ import annotations

import ast
import tarfile
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from folio.sections import (
    Document,
    Section,
    decode,
    divide,
    parse_document,
    parse_frontmatter,
    split_sections,
    text_hash,
)

CORPORA = Path("/work/shared/corpora")


def spans(text: str, budget: int = 8000) -> list[tuple[int, int]]:
    return [(r.start, r.end) for r in parse_document(text, budget).records]


def trails(text: str) -> list[tuple[str, ...]]:
    return [r.trail for r in parse_document(text).records]


# ------------------------------------------------------------------ headings


def test_atx_and_setext_headings_start_sections():
    text = "# One\ntext\n\nTwo\n===\nmore\n\nThree\n---\n## Four\n"
    doc = parse_document(text)
    assert [(r.start, r.end, r.level, r.heading) for r in doc.records] == [
        (1, 3 - 1, 1, "One"),
        (4, 6, 1, "Two"),
        (8, 9, 2, "Three"),
        (10, 10, 2, "Four"),
    ]
    assert doc.records[1].text == "Two\n===\nmore"


def test_hash_lines_in_fenced_code_do_not_start_sections():
    text = "# Top\n\n```sh\n# a comment\n## another\n```\n\n~~~\n# tilde\n~~~\n# Next\n"
    assert spans(text) == [(1, 10), (11, 11)]


def test_hash_lines_in_indented_code_do_not_start_sections():
    text = "# Top\n\nparagraph\n\n    # indented code\n    ## more\n\n# Next\n"
    assert spans(text) == [(1, 6), (8, 8)]


def test_headings_inside_multiline_html_comment_do_not_start_sections():
    text = "# Top\n\n<!--\n## Hidden\n\n### Also hidden\n-->\n\n## Real\nbody\n"
    doc = parse_document(text)
    assert spans(text) == [(1, 7), (9, 10)]
    assert doc.records[1].trail == ("Top", "Real")


def test_heading_text_is_inline_source_and_trail_skips_levels():
    text = "# Why `foo` matters\n### Deep *one*\n## Mid\n#### Deeper\n# Again\n"
    assert trails(text) == [
        ("Why `foo` matters",),
        ("Why `foo` matters", "Deep *one*"),
        ("Why `foo` matters", "Mid"),
        ("Why `foo` matters", "Mid", "Deeper"),
        ("Again",),
    ]


def test_multiline_setext_heading_starts_at_its_first_line():
    doc = parse_document("intro\n\nFirst line\nsecond line\n---\nbody\n")
    assert [(r.start, r.end, r.heading) for r in doc.records] == [
        (1, 1, ""),
        (3, 6, "First line second line"),
    ]


def test_same_level_heading_replaces_sibling_in_trail():
    assert trails("## A\n### B\n## C\n")[2] == ("C",)


def test_heading_followed_by_heading_is_one_line_section():
    text = "# A\n\n\n## B\n\n\n\n## C\nx\n"
    assert spans(text) == [(1, 1), (4, 4), (8, 9)]


def test_trailing_blank_lines_trimmed_including_whitespace_only():
    assert spans("# A\nbody\n   \n\t\n\n") == [(1, 2)]


def test_preamble_is_level_zero_and_trimmed():
    text = "\n\nintro line\n\n# Title\n"
    doc = parse_document(text)
    first = doc.records[0]
    assert (first.start, first.end, first.level, first.heading, first.trail) == (3, 3, 0, "", ())
    assert first.text == "intro line"
    assert doc.title == "Title"


def test_file_without_headings_is_one_preamble():
    assert spans("just\ntext\n\n") == [(1, 2)]


@pytest.mark.parametrize(
    "text",
    ["", "\n\n   \n", "---\ntitle: x\n---\n", "---\ntitle: x\n---\n\n\n", "---\n---"],
)
def test_nothing_to_index_gives_no_records(text):
    assert parse_document(text).records == ()


def test_heading_in_blockquote_is_part_of_the_enclosing_section():
    # Only document-level headings divide a file; a quoted one belongs to its quote.
    assert spans("# A\n> # quoted\n> text\n# B\n") == [(1, 3), (4, 4)]


def test_title_falls_back_to_first_h1_then_empty():
    assert parse_document("## Sub\n# First\n# Second\n").title == "First"
    assert parse_document("## Only sub\n").title == ""
    assert parse_document("---\ntitle: From FM\n---\n# H1\n").title == "From FM"
    # a non-string title (here a list) is ignored
    assert parse_document("---\ntitle: [a, b]\n---\n# H1\n").title == "H1"


# --------------------------------------------------------- line numbering


def test_crlf_gives_same_ranges_as_lf_and_strips_cr_from_text():
    lf = "---\na: 1\n---\npre\n\n# A\nx\n\nB\n---\ny\n\n\n"
    crlf = lf.replace("\n", "\r\n")
    assert spans(crlf) == spans(lf)
    assert [r.text for r in parse_document(crlf).records] == [
        r.text for r in parse_document(lf).records
    ]
    assert all("\r" not in r.text for r in parse_document(crlf).records)
    assert parse_document(crlf).frontmatter == {"a": "1"}


def test_lone_cr_does_not_create_a_line():
    # markdown-it would treat a lone "\r" as a newline and shift every later heading.
    text = "# A\nx\ry\rz\n# B\n"
    assert spans(text) == [(1, 2), (3, 3)]
    assert parse_document(text).records[0].text == "# A\nx y z"


@pytest.mark.parametrize("odd", ["\x0c", "\u2028", "\x0b", "\x1c", "\x85", "\u2029"])
def test_unicode_line_separators_inside_a_line_do_not_shift_numbering(odd):
    text = f"# A\nbefore{odd}after\n{odd}\n# B\nz\n"
    doc = parse_document(text)
    assert spans(text) == [(1, 2), (4, 5)]
    assert doc.records[0].text == f"# A\nbefore{odd}after"


def test_nul_bytes_do_not_crash():
    text = "# A\x00\nx\x00y\n# B\n\x00\n"
    assert spans(text) == [(1, 2), (3, 4)]


def test_decode_strips_bom_and_replaces_invalid_utf8_with_a_warning():
    assert decode("\ufeff# A\n".encode()) == ("# A\n", None)
    text, warning = decode(b"# A\nok\nbad \xff byte\n")
    assert text == "# A\nok\nbad \ufffd byte\n"
    assert warning is not None and warning.startswith("line 3: ") and "UTF-8" in warning


def test_bom_in_text_does_not_hide_frontmatter_or_shift_lines():
    doc = parse_document("\ufeff---\ntitle: T\n---\n# H\n")
    assert doc.frontmatter == {"title": "T"}
    assert spans("\ufeff---\ntitle: T\n---\n# H\n") == [(4, 4)]


def test_last_line_without_newline_is_counted():
    assert spans("# A\nlast") == [(1, 2)]


# ------------------------------------------------------------- frontmatter


def test_frontmatter_scalars_keep_source_text():
    text = (
        "---\n"
        "id: 0001\nversion: 1.10\ndate: 2019-04-13\nanswer: yes\noff: no\n"
        "octal: 0o17\nexp: 1e3\nquoted: 'true'\n"
        "---\n# H\n"
    )
    fm, nlines, warning = parse_frontmatter(text)
    assert (nlines, warning) == (10, None)
    assert fm == {
        "id": "0001",
        "version": "1.10",
        "date": "2019-04-13",
        "answer": "yes",
        "off": "no",
        "octal": "0o17",
        "exp": "1e3",
        "quoted": "true",  # quoted: the author meant a string
    }


def test_frontmatter_true_false_null_become_json_values():
    fm, _, _ = parse_frontmatter(
        '---\na: true\nb: False\nc: TRUE\nd: null\ne: ~\nf:\ng: NULL\nh: ""\n---\n'
    )
    assert fm == {
        "a": True,
        "b": False,
        "c": True,
        "d": None,
        "e": None,
        "f": None,
        "g": None,
        "h": "",
    }


def test_frontmatter_nested_maps_flatten_to_dotted_keys():
    fm, _, _ = parse_frontmatter(
        "---\nmilestone:\n  alpha: v1.9\n  beta:\n    when: '1.16'\nempty: {}\n---\n"
    )
    assert fm == {"milestone.alpha": "v1.9", "milestone.beta.when": "1.16"}


def test_frontmatter_lists_stay_lists_and_maps_in_lists_collect():
    fm, _, _ = parse_frontmatter(
        "---\n"
        "tags: [a, b]\nnested: [a, [b, [c]]]\nnone: []\nflags: [true, x]\n"
        "authors:\n  - name: ann\n    roles: [lead]\n  - name: bob\n    roles: [x, y]\n"
        "---\n"
    )
    assert fm == {
        "tags": ["a", "b"],
        "nested": ["a", "b", "c"],
        "none": [],
        "flags": [True, "x"],
        "authors.name": ["ann", "bob"],
        "authors.roles": ["lead", "x", "y"],
    }


def test_non_string_keys_are_stringified_source_text():
    fm, _, _ = parse_frontmatter("---\n1: a\ntrue: b\n2019-01-01: c\n---\n")
    assert fm == {"1": "a", "true": "b", "2019-01-01": "c"}


def test_invalid_yaml_warns_once_with_the_file_line_and_keeps_block_out_of_sections():
    text = "---\ntitle: ok\nbad: a: b\nz: 1\n---\n# H\n"
    doc = parse_document(text)
    assert doc.frontmatter == {}
    assert doc.warnings == (
        "line 3: invalid YAML frontmatter (mapping values are not allowed here) in `bad: a: b`; "
        "indexed without frontmatter until the YAML there (or just above it) is fixed",
    )
    assert spans(text) == [(6, 6)]
    assert doc.title == "H"


def test_invalid_yaml_line_counts_newlines_only():
    # YAML itself would count \u2028 as a line break; the warning must name the file line.
    fm, n, warning = parse_frontmatter("---\na: x\u2028y\nbad: a: b\nz: 1\n---\n")
    assert fm == {} and n == 5
    assert warning is not None and warning.startswith("line 3: invalid YAML frontmatter")


def test_list_or_scalar_frontmatter_is_ignored_with_warning():
    for body in ("- a\n- b\n", "just a string\n"):
        doc = parse_document(f"---\n{body}---\n# H\n")
        assert doc.frontmatter == {}
        assert len(doc.warnings) == 1 and "not a mapping" in doc.warnings[0]
        assert doc.records[0].start == 3 + body.count("\n")


def test_unclosed_frontmatter_is_body_text_with_warning():
    text = "---\ntitle: x\n# H\nbody\n"
    doc = parse_document(text)
    assert doc.frontmatter == {}
    assert doc.warnings == (
        "line 1: frontmatter opened with '---' is never closed; indexed without frontmatter",
    )
    assert spans(text) == [(1, 2), (3, 4)]


def test_frontmatter_closes_on_dots_and_allows_trailing_spaces():
    assert parse_frontmatter("---  \na: 1\n...\t\n# x\n") == ({"a": "1"}, 3, None)
    assert parse_frontmatter("--- \r\na: 1\r\n---\r\n") == ({"a": "1"}, 3, None)
    assert parse_frontmatter("----\na: 1\n---\n") == ({}, 0, None)
    assert parse_frontmatter("text\n---\na: 1\n---\n") == ({}, 0, None)


def test_recursive_yaml_alias_is_refused_with_warning():
    assert parse_frontmatter("---\na: &x [1, *x]\n---\n") == (
        {},
        3,
        "line 2: invalid YAML frontmatter (found unconstructable recursive node) in `a: &x [1, *x]`; "
        "indexed without frontmatter until the YAML there (or just above it) is fixed",
    )


def test_yaml_alias_bomb_is_refused_with_warning():
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 8):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    fm, _, warning = parse_frontmatter("---\n" + "\n".join(lines) + "\n---\n")
    assert fm == {} and warning is not None and "more than" in warning


# ------------------------------------------------------------------ dividing


def _section(text: str, start: int = 10) -> Section:
    return Section(start, start + text.count("\n"), 2, "H", ("T", "H"), text, False)


def test_short_section_is_one_record():
    s = _section("## H\nshort")
    assert divide(s, 100) == [s]


def test_divide_prefers_a_blank_line_in_the_last_half():
    para = "p" * 30
    text = "\n".join(["## H", para, para, "", para, para, para])
    # budget 120: lines 0..3 fit (4+1+30+1+30+1+0 = 67) plus line 4 -> 98, line 5 -> 129 too big
    pieces = divide(_section(text, start=1), 120)
    assert [(p.start, p.end) for p in pieces] == [(1, 3), (5, 7)]
    assert all(p.level == 2 and p.trail == ("T", "H") and not p.truncated for p in pieces)
    assert pieces[1].text == "\n".join([para] * 3)


def test_divide_without_usable_blank_ends_at_last_whole_line():
    text = "\n".join(["## H", "", "a" * 40, "b" * 40, "c" * 40])
    # the only blank (after 4 chars) is not in the last half of the piece
    pieces = divide(_section(text, start=1), 90)
    assert [(p.start, p.end) for p in pieces] == [(1, 4), (5, 5)]


def test_single_overlong_line_is_cut_and_marked():
    long = "x" * 20_000
    text = "## H\nbefore\n" + long + "\nafter"
    pieces = divide(_section(text, start=5), 8000)
    assert [(p.start, p.end, p.truncated) for p in pieces] == [
        (5, 6, False),
        (7, 7, True),
        (8, 8, False),
    ]
    assert pieces[1].text == "x" * 8000


def test_forty_thousand_char_section_with_paragraphs_divides_without_truncation():
    paragraph = "\n".join(["word " * 15] * 8)  # ~600 chars
    body = "\n\n".join([paragraph] * 66)
    text = "# Big\n\n" + body + "\n"
    assert len(text) > 40_000
    doc = parse_document(text, 8000)
    recs = doc.records
    assert len(recs) >= 5
    assert not any(r.truncated for r in recs)
    assert all(len(r.text) <= 8000 for r in recs)
    # pieces end at paragraph breaks: the line after each piece is blank
    lines = text.split("\n")
    assert all(lines[r.end] == "" for r in recs[:-1])
    _assert_exact_cover(text, doc)


def test_parse_document_divides_with_budget():
    text = "# A\n" + "\n\n".join(["y" * 50] * 10) + "\n# B\n"
    recs = parse_document(text, budget=120).records
    assert all(len(r.text) <= 120 for r in recs)
    assert recs[-1].heading == "B" and recs[0].heading == recs[1].heading == "A"


def test_text_hash_is_stable_sha256_prefix():
    assert text_hash("") == "e3b0c44298fc1c149afbf4c8996fb924"
    assert text_hash("# A\nbody") == text_hash("# A\nbody")
    assert len(text_hash("é")) == 32 and text_hash("a") != text_hash("b")


def test_records_are_frozen():
    rec = parse_document("# A\n").records[0]
    with pytest.raises(AttributeError):
        rec.start = 3  # type: ignore[misc]
    assert isinstance(parse_document(""), Document)


def test_module_is_pure():
    import folio.sections as mod

    tree = ast.parse(Path(mod.__file__).read_text())
    imported = {
        a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
    }
    imported |= {
        n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
    }
    assert not imported & {"click", "httpx", "numpy", "os", "pathlib", "sys"}
    called = {
        n.func.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    }
    assert not called & {"open", "print"}


# ------------------------------------------------------------- properties


def _assert_exact_cover(text: str, doc: Document, budget: int = 8000) -> None:
    text = text.removeprefix("\ufeff")
    lines = text.replace("\r\n", "\n").split("\n")
    if text.endswith("\n"):
        lines.pop()
    _, fm_lines, _ = parse_frontmatter(text)
    covered = set()
    prev_end = 0
    for r in doc.records:
        assert 1 <= r.start <= r.end <= max(len(lines), 1)
        assert r.start > prev_end, "records overlap or are out of order"
        assert r.start > fm_lines
        assert len(r.text) <= budget
        prev_end = r.end
        covered.update(range(r.start, r.end + 1))
    for number, line in enumerate(lines, 1):
        stripped = line.replace("\r", "")
        if number > fm_lines and stripped and not stripped.isspace():
            assert number in covered, f"line {number} {line!r} not covered"


_LINES = st.sampled_from(
    [
        "# H1",
        "## H2 `x`",
        "### H3",
        "###### H6",
        "####### seven",
        "#",
        "# ",
        "Setext",
        "===",
        "---",
        "***",
        "...",
        "",
        "   ",
        "\t",
        "text",
        "more words here",
        "```",
        "~~~",
        "    # indented",
        "<!--",
        "-->",
        "<div>",
        "</div>",
        "> # quoted",
        "- # item",
        "1. list",
        "title: x",
        "a: b: c",
        "x\ry",
        "\r",
        "\x0c",
        "a\u2028b",
        "\x00",
        "\ufeff",
        "x" * 70,
        "[ref]: /url",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(_LINES | st.text(max_size=12), max_size=40),
    crlf=st.booleans(),
    budget=st.integers(min_value=8, max_value=90),
)
def test_property_records_ordered_disjoint_covering(lines, crlf, budget):
    text = ("\r\n" if crlf else "\n").join(lines)
    doc = parse_document(text, budget)
    _assert_exact_cover(text, doc, budget)


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(_LINES, max_size=30))
def test_property_crlf_and_lf_agree(lines):
    lf = "\n".join(lines)
    if "\r" in lf:
        return
    a = parse_document(lf)
    b = parse_document(lf.replace("\n", "\r\n"))
    assert [(r.start, r.end, r.trail) for r in a.records] == [
        (r.start, r.end, r.trail) for r in b.records
    ]


@settings(max_examples=200, deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from(list("ab #\n\r-=`~<>!\t \x0c")), max_size=300),
    budget=st.integers(min_value=1, max_value=50),
)
def test_property_divide_covers_section_exactly(text, budget):
    for section in split_sections(text):
        pieces = divide(section, budget)
        assert pieces[0].start >= section.start and pieces[-1].end <= section.end
        lines = section.text.split("\n")
        covered = set()
        for a, b in zip(pieces, pieces[1:], strict=False):
            assert a.end < b.start
        for p in pieces:
            assert len(p.text) <= budget
            assert p.truncated == (
                p.start == p.end and len(lines[p.start - section.start]) > budget
            )
            covered.update(range(p.start, p.end + 1))
        for i, line in enumerate(lines):
            if line.strip():
                assert section.start + i in covered


# ------------------------------------------------------------ the two block parsers


def _with_python_parser(fn, *args):
    """`fn(*args)` with markdown-it-py reading every file, as where markdown_it_pyrs is not installed."""
    from folio import blocks

    held = blocks._rust()
    blocks._rs = False
    try:
        return fn(*args)
    finally:
        blocks._rs = held


def _sections_of(text: str) -> list[tuple]:
    return [(s.start, s.end, s.level, s.heading, s.trail) for s in split_sections(text)]


_NESTING = st.sampled_from(["- ", "  ", "> ", "1. ", "\t", "* ", "2) ", " ", ">"])


@settings(max_examples=400, deadline=None)
@given(lines=st.lists(_LINES | st.builds("".join, st.lists(_NESTING, max_size=24)).flatmap(
    lambda lead: _LINES.map(lambda line: lead + line)), max_size=40))
def test_property_a_files_sections_do_not_depend_on_the_parser_installed(lines):
    pytest.importorskip("markdown_it_pyrs")
    text = "\n".join(lines)
    alone = _with_python_parser(parse_document, text)
    assume(not any(w.startswith("the Markdown parser failed") for w in alone.warnings))  # (its own IndexError)
    assert _sections_of(text) == _with_python_parser(_sections_of, text)


def test_nesting_that_would_exhaust_the_compiled_parsers_stack_is_read_and_its_headings_found():
    text = "# Top\n\n" + "- " * 50_000 + "x\n" + "> " * 50_000 + "y\n\n# After\n\nfound\n"
    assert [(s.start, s.heading) for s in split_sections(text)] == [(1, "Top"), (6, "After")]


def test_a_generated_link_list_is_read_in_linear_time_with_its_headings(tmp_path, write_tree, run_folio):
    """40,000 reference definitions on consecutive lines (a 560 KB generated link list) took the
    compiled parser 36 s, and every query after an edit as long (its refresh parses the file again):
    such a file is read by markdown-it-py (under a second). The timeout bounds a hang, 30x over."""
    root = write_tree(tmp_path / "c", {"links.md": "# Links\n\n" + "".join(f"[l{i}]: https://x.org/{i}\n"
                                                                           for i in range(40_000))
                                       + "\n## After\n\nthe text after the list\n"})
    r = run_folio("index", cwd=root, env={"FOLIO_ENDPOINT": "http://127.0.0.1:9/v1/embeddings"}, timeout=30)
    assert r.returncode == 0, r.stderr
    q = run_folio("query", "the text after the list", "--lexical", "--paths-only", "-l", "1", cwd=root)
    assert q.stdout.split() == ["links.md:40004-40006"]
    text = (root / "links.md").read_text()
    assert _sections_of(text) == _with_python_parser(_sections_of, text)


@pytest.mark.parametrize("name", ["eips", "keps", "rust-book"])
def test_golden_every_file_of_a_corpus_splits_the_same_with_either_parser(md_corpus, name):
    pytest.importorskip("markdown_it_pyrs")
    files = sorted(md_corpus(name).rglob("*.md"))
    assert files
    for path in files:
        text, _warning = decode(path.read_bytes())
        assert _sections_of(text) == _with_python_parser(_sections_of, text), path


# ------------------------------------------------------------ golden files


@pytest.fixture(scope="session")
def md_corpus(tmp_path_factory):
    """Extract the real corpora (read-only tarballs) into a temp dir, never into the repo."""

    def extract(name: str) -> Path:
        tarball = CORPORA / f"{name}.tar.gz"
        if not tarball.exists():
            pytest.skip(f"{tarball} is absent; golden tests need the shared corpora")
        dest = tmp_path_factory.mktemp(name)
        with tarfile.open(tarball) as tf:
            members = [m for m in tf.getmembers() if m.isfile() and m.name.endswith(".md")]
            if hasattr(tarfile, "data_filter"):
                tf.extractall(dest, members=members, filter="data")
            else:  # pragma: no cover - old Pythons without extraction filters
                tf.extractall(dest, members=members)  # noqa: S202
        return dest

    cache: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in cache:
            cache[name] = extract(name)
        return cache[name]

    return get


def _doc(path: Path) -> Document:
    text, warning = decode(path.read_bytes())
    assert warning is None
    return parse_document(text)


def _find(doc: Document, start: int) -> Section:
    return next(r for r in doc.records if r.start == start)


def test_golden_kep_template_comments_skipped_levels_and_list_of_maps(md_corpus):
    doc = _doc(md_corpus("keps") / "keps/keps/NNNN-kep-template/README.md")
    fm = doc.frontmatter
    assert fm["kep-number"] == "NNNN"
    assert fm["creation-date"] == "yyyy-mm-dd"
    assert fm["latest-milestone"] == "v1.19"
    assert fm["milestone.beta"] == "v1.20"
    assert fm["disable-supported"] is True
    assert fm["feature-gates.name"] == ["MyFeature"]
    assert fm["feature-gates.components"] == ["kube-apiserver", "kube-controller-manager"]
    assert "feature-gates" not in fm
    assert doc.title == "KEP Template"  # frontmatter wins over the H1
    # Lines 1-53 are frontmatter; 54-120 is one HTML comment before the H1: a preamble.
    pre = doc.records[0]
    assert (pre.start, pre.end, pre.level, pre.trail) == (54, 120, 0, ())
    h1 = doc.records[1]
    assert (h1.start, h1.heading) == (121, "KEP-NNNN: Your short, descriptive title")
    # ### Test Plan (310) then ##### (327): skipped level nests under Test Plan.
    test_plan = _find(doc, 310)
    assert test_plan.end == 325
    prereq = _find(doc, 327)
    assert prereq.end == 332
    assert prereq.trail == (
        "KEP-NNNN: Your short, descriptive title",
        "Design Details",
        "Test Plan",
        "Prerequisite testing updates",
    )


def test_golden_kep_headings_inside_html_comment(md_corpus):
    path = md_corpus("keps") / "keps/keps/sig-architecture/1659-standard-topology-labels/README.md"
    doc = _doc(path)
    # "#### Alpha -> Beta Graduation" etc. (lines 247, 253, 264) sit inside <!-- 222..274 -->.
    grad = _find(doc, 220)
    assert (grad.end, grad.level) == (274, 3)
    assert grad.trail == (
        "KEP-1659: Standard Topology Labels",
        "Design Details",
        "Graduation Criteria",
    )
    assert "#### Alpha -> Beta Graduation" in grad.text
    assert not any(r.start in (247, 253, 264) for r in doc.records)
    # A heading directly followed by a subheading is a one-line section.
    prr = _find(doc, 288)
    assert (prr.end, prr.trail) == (
        288,
        ("KEP-1659: Standard Topology Labels", "Production Readiness Review Questionnaire"),
    )
    assert doc.frontmatter["latest-milestone"] == "0.0"
    assert doc.frontmatter["creation-date"] == "2020-03-31"
    assert doc.frontmatter["disable-supported"] is False
    assert doc.frontmatter["see-also"] == []
    assert doc.frontmatter["participating-sigs"] == [
        "sig-cloud-provider",
        "sig-network",
        "sig-scheduling",
    ]


def test_golden_kep_hash_comment_in_fenced_code(md_corpus):
    path = (
        md_corpus("keps")
        / "keps/keps/sig-cloud-provider/azure/604-cross-resource-group-nodes/README.md"
    )
    doc = _doc(path)
    design = _find(doc, 68)
    # "# For cross-RG nodes" (79) and "# For on-prem nodes" (82) are shell comments in ```sh.
    assert design.end == 91
    assert design.trail == ("Cross resource group nodes", "Design")
    assert _find(doc, 93).heading == "Implementation"
    assert doc.frontmatter["kep-number"] == "604"
    assert doc.frontmatter["creation-date"] == "2018-08-09"
    assert doc.frontmatter["latest-milestone"] == "0.0"
    assert doc.frontmatter["editor"] == "@feiskyer"


def test_golden_kep_odd_date_stays_source_text(md_corpus):
    path = (
        md_corpus("keps")
        / "keps/keps/sig-cluster-lifecycle/kubeadm/4214-separate-super-user-kubeconfig/README.md"
    )
    doc = _doc(path)
    assert doc.frontmatter["creation-date"] == "2023-9-18"
    assert doc.frontmatter["last-updated"] == "2023-10-19"
    assert doc.records[0].start == 22  # the template comment right after the frontmatter


def test_golden_rust_book_hash_lines_in_code_and_comments(md_corpus):
    src = md_corpus("rust-book") / "rust-book/src"
    doc = _doc(src / "ch17-01-futures-and-syntax.md")
    assert doc.title == ""  # starts at H2, no H1 and no frontmatter
    defining = _find(doc, 75)
    # "# extern crate trpl;" (161) is a hidden line in a ```rust block.
    assert defining.end == 196
    # "## Our First Async Program" (42) is a sibling of the opening H2, not its child.
    assert defining.trail == (
        "Our First Async Program",
        "Defining the page_title Function",
    )
    running = _find(doc, 198)
    # "# copy the output here" (281) is inside a <!-- manual-regeneration --> comment.
    assert running.end == 337
    assert not any(r.start == 281 for r in doc.records)

    ch7 = _doc(src / "ch07-00-managing-growing-projects-with-packages-crates-and-modules.md")
    assert [(r.start, r.end, r.level) for r in ch7.records][:2] == [(1, 3, 0), (5, 52, 1)]
    assert ch7.title == "Packages, Crates, and Modules"


@pytest.mark.slow
def test_golden_whole_corpora_parse_cleanly(md_corpus):
    for name in ("keps", "rust-book"):
        # every file of rust-book, every third KEP: enough variety, a few seconds
        step = 3 if name == "keps" else 1
        for path in sorted(md_corpus(name).rglob("*.md"))[::step]:
            text, _ = decode(path.read_bytes())
            doc = parse_document(text)
            _assert_exact_cover(text, doc)


def test_keys_that_flatten_alike_keep_both_values_and_warn_once_with_the_dotted_line():
    fm, _, warning = parse_frontmatter("---\nt: 1\na:\n  b: y\n'a.b': x\nc.d: [1, 2]\nc: {d: [2, 3]}\n---\n")
    assert fm == {"t": "1", "a.b": ["y", "x"], "c.d": ["1", "2", "3"]}
    assert warning is not None and warning.startswith("line 5: frontmatter `a: {b: ...}` and `a.b: ...` both read")
    assert warning.endswith("(and 1 more such pair)")
    # the maps of one list gather their fields: that is no clash, duplicates and all
    fm, _, warning = parse_frontmatter("---\nauthors:\n  - name: a\n  - name: a\n---\n")
    assert (fm, warning) == ({"authors.name": ["a", "a"]}, None)
    fm, _, warning = parse_frontmatter("---\nauthors.name: c\nauthors:\n  - name: a\n---\n")
    assert fm == {"authors.name": ["c", "a"]} and warning.startswith("line 2: frontmatter `authors.name: ...`")


def test_a_body_over_the_window_is_read_in_windows_with_the_sections_of_the_whole(monkeypatch):
    """A body longer than blocks.WINDOW is parsed a window at a time (the parser holds ~35 bytes per
    byte: half a gigabyte for one 13 MB file); a window ends inside a fence, an HTML block, a list and
    a setext heading, and the sections are still those of the body read at once."""
    from folio import blocks

    unit = ("# Part {i}\n\ntext {i}\n\n```\n# not a heading {i}\n```\n\n<div>\n\n# html {i}\n</div>\n\n"
            "- item {i}\n  # in the item\n\nSetext {i}\n---\n\n> # quoted {i}\n\n")
    text = "".join(unit.format(i=i) for i in range(12_000))
    assert len(text) > blocks.WINDOW
    windowed = parse_document(text)
    monkeypatch.setattr(blocks, "WINDOW", len(text))
    assert windowed == parse_document(text)
    assert len(windowed.records) == 3 * 12_000
    assert [s.heading for s in windowed.records[-3:]] == ["Part 11999", "html 11999", "Setext 11999"]
