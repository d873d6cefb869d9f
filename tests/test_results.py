"""Results worth reading (issue 7): merged rows, a full --limit, --paths-only, status --truncated,
several corpora in one query, and the nested-index warnings. Through the real CLI against the fake
embeddings server (and the real llama-server where the issue asks for it)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from fakeserver import Embedder
from helpers import folio_command

STEP = "## Step {i}\n\n{body}\n\n\n"  # two blank lines between siblings: records still touch

BREAD_STEPS = [
    "Feed the sourdough starter with flour and water.",
    "Feed the sourdough starter with flour and water.\nStir the sourdough starter well.",
    "Feed the sourdough starter with flour and water.\nKeep the sourdough starter warm.\nCover the jar.",
    "Feed the sourdough starter with flour and water.",
    "Feed the sourdough starter with flour and water.\nStir the sourdough starter again.",
]


def bread() -> str:
    return "# Baking bread\n\nA few words on ovens and loaves.\n\n" + "".join(
        STEP.format(i=i, body=b) for i, b in enumerate(BREAD_STEPS, 1))


GARDEN = """# Garden

Tomatoes need sun and water daily.

## Pruning

Cut the branches of roses in winter.

## Sourdough note

The sourdough starter smells sour when it is hungry for flour.

## Compost

Leaves and peels turn into compost over months.
"""

CARS = "# Cars\n\nEngines burn fuel.\n\n## Tires\n\nRubber wears down on gravel roads.\n"


def index(run_folio, root: Path, url: str, *extra):
    r = run_folio("index", root, "--endpoint", url, *extra, cwd=root)
    assert r.returncode == 0, r.stderr
    return r


def query_json(run_folio, cwd: Path, text: str, *extra) -> dict:
    r = run_folio("query", text, "--json", *extra, cwd=cwd)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def record_text(root: Path, path: str, start: int, end: int) -> str:
    lines = (root / path).read_text(encoding="utf-8").split("\n")
    return "\n".join(lines[start - 1:end])


@pytest.fixture
def kitchen(tmp_path, fake_server, write_tree, run_folio):
    srv = fake_server()
    root = write_tree(tmp_path / "kitchen", {"bread.md": bread(), "garden.md": GARDEN, "cars.md": CARS})
    index(run_folio, root, srv.url)
    return root, srv


# --------------------------------------------------------------------------- merging


def test_five_sibling_sections_come_back_as_one_row(kitchen, run_folio):
    root, _ = kitchen
    r = run_folio("query", "sourdough starter flour water", "--mode", "semantic", cwd=root)  # cosine's merging rule
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    steps = [i for i, ln in enumerate(bread().split("\n"), 1) if ln.startswith("## Step")]
    last = len(bread().rstrip("\n").split("\n"))
    assert re.fullmatch(rf"#1  \d\.\d{{3}}  bread\.md:{steps[0]}-{last}", lines[0])
    assert lines[1] == "    Baking bread  (5 sections)"
    # The intro beside the steps shares no word with them: it is not part of the row.
    assert not any(ln.split()[-1].startswith("bread.md:1-") for ln in lines if ln.startswith("#"))


def test_merged_score_is_the_line_weighted_mean_and_trail_the_common_prefix(kitchen, run_folio):
    root, _ = kitchen
    q = "sourdough starter flour water"
    top = query_json(run_folio, root, q, "--mode", "semantic")["results"][0]
    assert (top["path"], top["pieces"], top["trail"]) == ("bread.md", 5, ["Baking bread"])
    # Recompute each piece's score the way the server embeds, and the weighted mean by lines.
    text = bread().split("\n")
    starts = [i for i, ln in enumerate(text, 1) if ln.startswith("## Step")]
    pieces = []
    for n, s in enumerate(starts):
        e = (starts[n + 1] - 1) if n + 1 < len(starts) else len(text)
        while not text[e - 1].strip():
            e -= 1
        pieces.append((s, e))
    emb = Embedder()
    qv = emb.embed([q])[0]
    vecs = emb.embed([record_text(root, "bread.md", s, e) for s, e in pieces])
    scores = vecs @ qv
    weights = np.array([e - s + 1 for s, e in pieces], dtype=np.float64)
    assert len(set(weights)) > 1 and np.ptp(scores) > 0.005  # the weighting matters here
    assert np.ptp(scores) <= 0.10 * scores.max()  # premise: alike by the rule
    assert top["score"] == pytest.approx(float((scores * weights).sum() / weights.sum()), abs=1e-4)
    assert (top["start"], top["end"]) == (pieces[0][0], pieces[-1][1])


def test_a_tight_answer_beside_unrelated_background_stays_tight(kitchen, run_folio):
    root, _ = kitchen
    out = query_json(run_folio, root, "sourdough starter smells sour hungry")
    top = out["results"][0]
    lines = GARDEN.split("\n")
    start = lines.index("## Sourdough note") + 1
    assert (top["path"], top["start"], top["end"], top["pieces"]) == ("garden.md", start, start + 2, 1)
    assert top["trail"] == ["Garden", "Sourdough note"]


def test_alike_sections_merge_only_when_nothing_lies_between(tmp_path, fake_server, write_tree, run_folio):
    srv = fake_server()
    same = "The glaze cracks in the kiln when the firing cools too fast."
    root = write_tree(tmp_path / "c", {
        "a.md": f"# Pottery\n\n## First\n\n{same}\n\n## Unrelated\n\nBicycles have two wheels and a chain.\n\n"
                f"## Second\n\n{same}\n",
        "b.md": f"# Kiln\n\n{same}\n",
    })
    index(run_folio, root, srv.url)
    res = query_json(run_folio, root, "glaze cracks kiln firing cools", "-l", "3")["results"]
    got = sorted((h["path"], h["start"], h["end"], h["pieces"]) for h in res)
    # a.md's two alike sections have an unrelated record between them; b.md is another file.
    assert got == [("a.md", 3, 5, 1), ("a.md", 11, 13, 1), ("b.md", 1, 3, 1)]


def test_a_divided_section_comes_back_whole(tmp_path, fake_server, write_tree, run_folio):
    srv = fake_server()
    para = "The lighthouse keeper trims the lamp wick and polishes the lens every evening."
    body = "\n\n".join([para] * 12)
    root = write_tree(tmp_path / "c", {"sea.md": f"# Coast\n\nGulls.\n\n## Lighthouse\n\n{body}\n\n## Harbour\n\n"
                                                 f"Boats are tied to the quay.\n"})
    index(run_folio, root, srv.url, "--max-chars", "300")
    top = query_json(run_folio, root, "lighthouse keeper lamp wick lens")["results"][0]
    assert top["pieces"] > 1  # the section was divided into several records ...
    n_lines = 2 * 12 - 1
    assert (top["start"], top["end"]) == (5, 5 + 2 + n_lines - 1)  # ... and it comes back whole
    assert top["trail"] == ["Coast", "Lighthouse"]


def test_limit_counts_merged_rows(tmp_path, fake_server, write_tree, run_folio):
    srv = fake_server()
    files = {}
    for k in range(8):  # four identical sections per file; each file a little less on topic than the last
        filler = " ".join(f"filler{k}x{j}" for j in range(k))
        files[f"kiln{k}.md"] = f"# Kiln {k}\n\n" + f"## Firing\n\nGlaze the pots and fire the kiln slowly. {filler}\n\n" * 4
    for k in range(6):
        files[f"misc{k}.md"] = f"# Misc {k}\n\nSomething about trains and stations number {k}.\n"
    root = write_tree(tmp_path / "c", files)
    index(run_folio, root, srv.url)
    res = query_json(run_folio, root, "glaze pots fire kiln slowly", "-l", "5")["results"]
    assert len(res) == 5
    assert [h["rank"] for h in res] == [1, 2, 3, 4, 5]
    assert all(h["pieces"] == 4 for h in res)  # the 20 best records collapse into 5 rows
    assert [h["path"] for h in res] == [f"kiln{k}.md" for k in range(5)]
    assert [h["score"] for h in res] == sorted((h["score"] for h in res), reverse=True)
    one = query_json(run_folio, root, "glaze pots fire kiln slowly", "-l", "1")["results"]
    assert one[0] == res[0]  # a row is the same whatever --limit asks for


# --------------------------------------------------------------------------- --paths-only

REF = re.compile(r"^[^\s:]+:\d+-\d+$")


def test_paths_only_prints_refs_alone_and_every_notice_on_stderr(kitchen, run_folio):
    root, _ = kitchen
    with open(root / "garden.md", "a", encoding="utf-8") as fh:
        fh.write("\n## Starter jar\n\nA clean jar for the sourdough starter.\n")
    r = run_folio("query", "sourdough starter", "--paths-only", "--no-refresh", cwd=root)
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out and all(REF.match(ln) for ln in out), r.stdout
    stale = [ln for ln in out if ln.startswith("garden.md:")]
    assert stale and f"warning: {stale[0]} is stale" in r.stderr
    assert "stale" not in r.stdout
    # Refreshing: the notice still goes to stderr, the refs stay alone on stdout.
    r = run_folio("query", "sourdough starter", "--paths-only", cwd=root)
    assert r.returncode == 0, r.stderr
    assert all(REF.match(ln) for ln in r.stdout.splitlines()), r.stdout
    assert "re-embedded" in r.stderr


def test_paths_only_into_head_is_clean(kitchen):
    root, _ = kitchen
    cmd = " ".join(f"'{c}'" for c in folio_command())
    r = subprocess.run(["bash", "-o", "pipefail", "-c", f"{cmd} query bread --paths-only -l 100 | head -1"],
                       cwd=root, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == 1 and REF.match(r.stdout.strip())
    assert "Traceback" not in r.stderr and "Error" not in r.stderr


def test_paths_only_into_a_closed_pipe_exits_quietly(kitchen):
    root, _ = kitchen
    # The reader is gone before folio writes a byte: every write meets EPIPE.
    p = subprocess.Popen([*folio_command(), "query", "bread", "--paths-only", "-l", "100"], cwd=root,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p.stdout.close()
    err = p.stderr.read()
    assert p.wait(timeout=120) == 0, err
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err


# --------------------------------------------------------------------------- status --truncated


def test_status_truncated_lists_a_cut_line_not_a_divided_section(tmp_path, fake_server, write_tree, run_folio):
    srv = fake_server()
    root = write_tree(tmp_path / "c", {"fine.md": "# Fine\n\nShort.\n"})
    index(run_folio, root, srv.url)
    r = run_folio("status", "--truncated", cwd=root)
    assert (r.returncode, r.stdout.strip()) == (0, "no record was cut: every section fit the budget or was "
                                                    "divided at line ends")
    long_line = " ".join(f"word{i % 97}" for i in range(4000))[:20000]
    paras = "\n\n".join(" ".join(f"tide{i % 13}" for i in range(70)) for _ in range(100))
    assert len(long_line) == 20000 and "\n" not in long_line and len(paras) > 40000
    write_tree(root, {"docs/line.md": f"# Data\n\nIntro.\n\n## Blob\n\n{long_line}\n",
                      "docs/essay.md": f"# Essay\n\n{paras}\n"})
    index(run_folio, root, srv.url)
    r = run_folio("status", "--truncated", cwd=root / "docs")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["line.md:7-7  Data > Blob"]
    j = json.loads(run_folio("status", "--truncated", "--json", cwd=root).stdout)
    assert [(t["path"], t["start"], t["end"], t["trail"]) for t in j["truncated"]] == [
        ("docs/line.md", 7, 7, ["Data", "Blob"])]
    assert "1 truncated" in run_folio("status", cwd=root).stdout


# --------------------------------------------------------------------------- several corpora


def single_section_corpus(write_tree, root: Path, topics: dict[str, str]) -> Path:
    return write_tree(root, {f"{name}.md": f"# {name.title()}\n\n{text}\n" for name, text in topics.items()})


@pytest.fixture
def two_corpora(tmp_path, write_tree):
    a = single_section_corpus(write_tree, tmp_path / "a", {
        "owls": "Owls hunt mice at night with silent wings.",
        "ferns": "Ferns grow in damp shade and spread by spores.",
        "mice": "Field mice hide from owls under the hedges at night.",
    })
    b = single_section_corpus(write_tree, tmp_path / "b", {
        "bats": "Bats hunt moths at night by echo.",
        "owl_boxes": "Build an owl box so owls can nest and hunt mice near the barn.",
        "tax": "File the tax return before April.",
    })
    here = tmp_path / "elsewhere"
    here.mkdir()
    return a, b, here


def test_two_corpora_one_ranking(two_corpora, fake_server, run_folio):
    a, b, here = two_corpora
    srv = fake_server()
    index(run_folio, a, srv.url)
    index(run_folio, b, srv.url)
    q = "owls hunt mice at night"
    # cosine scores compare across separate queries (fused ranks depend on what else is ranked)
    sem = ("--mode", "semantic")
    each = (query_json(run_folio, a, q, "-l", "3", *sem)["results"] + query_json(run_folio, b, q, "-l", "3", *sem)["results"])
    before = srv.stats()["requests"]
    both = query_json(run_folio, here, q, "-l", "6", "--root", "../a", "--root", str(b), *sem)
    assert srv.stats()["requests"] == before + 1  # the question is embedded once for both
    assert both["root"] is None and both["roots"] == [str(a), str(b)]
    want = sorted(each, key=lambda h: -h["score"])
    got = both["results"]
    assert [(h["root"], h["path"]) for h in got] == [(h["root"], h["path"]) for h in want]
    assert [h["score"] for h in got] == pytest.approx([h["score"] for h in want], abs=1e-6)
    assert {h["root"] for h in got[:3]} == {str(a), str(b)}  # interleaved, not one corpus after the other
    # References open from where the user stands.
    r = run_folio("query", q, "--root", "../a", "--root", "../b", "--paths-only", cwd=here)
    assert r.returncode == 0, r.stderr
    for ref in r.stdout.splitlines():
        path, _, _ = ref.rpartition(":")
        assert (here / path).is_file(), ref
    assert {ref.split("/")[1] for ref in r.stdout.splitlines()} == {"a", "b"}


def test_status_over_several_roots(two_corpora, fake_server, run_folio):
    a, b, here = two_corpora
    srv = fake_server()
    index(run_folio, a, srv.url)
    index(run_folio, b, srv.url)
    r = run_folio("status", "--root", a, "--root", b, cwd=here)
    assert r.returncode == 0, r.stderr
    assert f"root      {a}" in r.stdout and f"root      {b}" in r.stdout
    j = json.loads(run_folio("status", "--root", a, "--root", b, "--json", cwd=here).stdout)
    assert [x["root"] for x in j["roots"]] == [str(a), str(b)] and [x["files"] for x in j["roots"]] == [3, 3]
    r = run_folio("status", "--root", here, cwd=here)
    assert r.returncode == 1 and r.stderr.startswith(f"folio: no folio index at {here}")
    (a / "sub").mkdir()  # a directory inside a corpus names the corpus, never a second index to make
    r = run_folio("query", "anything", "--root", a / "sub", cwd=here)
    assert r.returncode == 1 and f"it lies inside the corpus at {a}" in r.stderr and f"--root {a})" in r.stderr
    assert "`folio index" not in r.stderr


@pytest.mark.parametrize("how", ["budget", "space", "dim"])
def test_corpora_that_cannot_share_a_ranking_are_refused_by_name(how, two_corpora, fake_server, run_folio):
    a, b, here = two_corpora
    srv = fake_server()
    index(run_folio, a, srv.url)
    if how == "budget":
        index(run_folio, b, srv.url, "--max-chars", "4000")
        words = ["budget of 4000 characters", "8000"]
    elif how == "space":
        index(run_folio, b, fake_server(space="other").url)
        words = ["another vector space"]
    else:
        index(run_folio, b, fake_server(dim=256).url)
        words = ["256-dimensional", "384-dimensional"]
    r = run_folio("query", "owls", "--root", a, "--root", b, cwd=here)
    assert r.returncode == 1 and r.stdout == ""
    line = r.stderr.strip()
    assert len(line.splitlines()) == 1 and line.startswith(f"folio: cannot rank {a} and {b} together: {b} ")
    assert all(w in line for w in words), line
    assert f"folio index {b}" in line  # the fix names the corpus to re-index
    assert "Traceback" not in r.stderr


def test_a_stale_file_in_the_second_corpus_is_refreshed(two_corpora, fake_server, run_folio):
    a, b, here = two_corpora
    srv = fake_server()
    index(run_folio, a, srv.url)
    index(run_folio, b, srv.url)
    (b / "tax.md").write_text("# Tax\n\nPaperwork.\n\n## Barn owls\n\nBarn owls hunt mice at night over the "
                              "fields.\n", encoding="utf-8")
    out = query_json(run_folio, here, "barn owls hunt mice at night", "--root", a, "--root", b)
    assert any("re-embedded" in n for n in out["notices"])
    top = out["results"][0]
    assert (top["root"], top["path"], top["start"], top["end"], top["freshness"]) == (str(b), "tax.md", 5, 7,
                                                                                       "current")


# --------------------------------------------------------------------------- nesting


def test_nested_index_warns_and_each_shared_file_is_ranked_once(tmp_path, fake_server, write_tree, run_folio):
    srv = fake_server()
    outer = write_tree(tmp_path / "x", {
        "top.md": "# Top\n\nHerons fish in the shallow river.\n",
        "sub/one.md": "# One\n\nHerons stand still in the river to fish.\n",
        "sub/two.md": "# Two\n\nKingfishers dive into the river for fish.\n",
    })
    index(run_folio, outer, srv.url)
    r = index(run_folio, outer / "sub", srv.url)
    assert f"warning: {outer / 'sub'} lies inside the corpus indexed at {outer}, and 2 of its files are held " \
           f"by both indexes" in r.stderr
    r = index(run_folio, outer, srv.url)
    assert "warning: sub/: holds its own folio index" in r.stderr
    out = query_json(run_folio, tmp_path, "herons fish river", "-l", "10", "--root", outer, "--root", outer / "sub")
    refs = [os.path.normpath(tmp_path / h["ref"].rpartition(":")[0]) for h in out["results"]]
    assert sorted(refs) == sorted(str(p) for p in (outer / "top.md", outer / "sub/one.md", outer / "sub/two.md"))
    assert {h["root"] for h in out["results"] if h["path"] in ("one.md", "two.md")} == {str(outer / "sub")}
    assert f"(2 file(s) are held by both {outer} and {outer / 'sub'}: each is ranked once, from " \
           f"{outer / 'sub'})" in out["notices"]


def test_index_without_root_never_creates_a_nested_index(tmp_path, fake_server, write_tree, run_folio):
    srv = fake_server()
    outer = write_tree(tmp_path / "x", {"a.md": "# A\n\nText.\n", "deep/b.md": "# B\n\nMore.\n"})
    index(run_folio, outer, srv.url)
    r = run_folio("index", "--endpoint", srv.url, cwd=outer / "deep")
    assert r.returncode == 0, r.stderr
    assert not (outer / "deep" / ".folio").exists()
    assert "warning" not in r.stderr
    r = run_folio("index", "--endpoint", srv.url, cwd=tmp_path)  # no corpus above: indexes here
    assert r.returncode == 0 and (tmp_path / ".folio").is_dir()


# --------------------------------------------------------------------------- the real llama-server


def test_corpora_indexed_by_one_llama_server_rank_together(llama, two_corpora, tmp_path, fake_server,
                                                           write_tree, run_folio):
    a, b, here = two_corpora
    index(run_folio, a, llama.url)
    index(run_folio, b, llama.url)
    q = "owls hunting mice in the dark"
    out = query_json(run_folio, here, q, "-l", "6", "--root", a, "--root", b)
    got = out["results"]
    assert len(got) == 6 and {h["root"] for h in got} == {str(a), str(b)}
    assert [h["score"] for h in got] == sorted((h["score"] for h in got), reverse=True)
    assert got[0]["path"] in ("owls.md", "owl_boxes.md", "mice.md")
    # Another budget, or another server's space: refused, naming the corpus.
    c = single_section_corpus(write_tree, tmp_path / "c", {"hawks": "Hawks hunt voles by day."})
    index(run_folio, c, llama.url, "--max-chars", "4000")
    r = run_folio("query", q, "--root", a, "--root", c, cwd=here)
    assert r.returncode == 1 and f"{c} was divided into records at a budget of 4000 characters" in r.stderr
    d = single_section_corpus(write_tree, tmp_path / "d", {"hawks": "Hawks hunt voles by day."})
    index(run_folio, d, fake_server().url)
    r = run_folio("query", q, "--root", a, "--root", d, cwd=here)
    assert r.returncode == 1
    assert f"cannot rank {a} and {d} together: {d} was embedded in another vector space" in r.stderr


# --------------------------------------------------------------------------- the rule itself


def _rule(scores: dict[int, float | None], files: list[list[int]], seeds: list[int], tol: float, planes=()):
    from folio.rows import merge_touching

    where = {s: (f, i) for f in files for i, s in enumerate(f)}

    def neighbours(key):
        f, i = where[key[1]]
        return (f[i - 1] if i > 0 else None), (f[i + 1] if i + 1 < len(f) else None)

    judges = [((lambda c, s, p=p: p.get(s)), t) for p, t in planes]
    return [g for _, g in merge_touching([(0, s) for s in seeds], lambda c, s: scores[s], neighbours, tol, judges)]


def test_merge_rule_spread_not_drift():
    # 0.80, 0.76, 0.72, 0.68: each step is within 0.04 of the last, but a row's pieces must all be
    # within tol of each other, so the row stops once the spread would pass it.
    scores = {1: 0.80, 2: 0.76, 3: 0.72, 4: 0.68}
    assert _rule(scores, [[1, 2, 3, 4]], [1, 2, 3, 4], tol=0.085) == [[1, 2, 3], [4]]


def test_merge_rule_grows_toward_the_better_side_and_stops_at_a_taken_or_blocked_neighbour():
    scores = {1: 0.50, 2: 0.70, 3: 0.90, 4: 0.88, 5: None, 6: 0.89, 7: 0.86}
    # 3 takes 4 (0.88) before 2 (0.70 is too far anyway); 5 is no candidate (filtered, no vector):
    # it separates 4 from 6, so 6 and 7 make their own row although they score alike.
    assert _rule(scores, [[1, 2, 3, 4, 5, 6, 7]], [3, 6, 4, 7, 2, 1], tol=0.09) == [[3, 4], [6, 7], [2], [1]]
    # Other files never merge, however alike.
    assert _rule({1: 0.9, 2: 0.9}, [[1], [2]], [1, 2], tol=0.09) == [[1], [2]]


def test_merge_rule_fused_rows_merge_only_where_every_plane_would():
    # Reciprocal-rank scores of ranks 1 to 5 all sit within 10% of the best: by them alone every
    # touching winner would merge. Each plane's own scores decide instead (issue 39).
    fused = {1: 0.0328, 2: 0.0323, 3: 0.0318, 4: 0.0313, 5: 0.0308}
    semantic = ({1: 0.61, 2: 0.60, 3: 0.35, 4: 0.59, 5: 0.58}, 0.061)
    lexical = ({1: 9.0, 2: 8.8, 3: 8.9, 4: 2.0, 5: 8.7}, 0.9)
    assert _rule(fused, [[1, 2, 3, 4, 5]], [1, 2, 3, 4, 5], tol=0.00328) == [[1, 2, 3, 4, 5]]
    # 1 and 2 both planes would merge; 3 the semantic plane puts far below, 4 the lexical one.
    assert _rule(fused, [[1, 2, 3, 4, 5]], [1, 2, 3, 4, 5], 0.00328, [semantic, lexical]) == [[1, 2], [3], [4], [5]]
    # A plane that ranks neither piece has no say (a section no question word is in, twice); one
    # that ranks one piece and not the other would show them apart.
    lex = ({1: 9.0}, 0.9)
    assert _rule(fused, [[1, 2, 3]], [1, 2, 3], 0.00328, [({1: 0.6, 2: 0.6, 3: 0.6}, 0.06), lex]) == [[1], [2, 3]]


def test_top_level_siblings_merge_under_an_empty_trail(tmp_path, fake_server, write_tree, run_folio):
    srv = fake_server()
    same = "Wind turbines turn slowly in the evening breeze."
    root = write_tree(tmp_path / "c", {"w.md": f"# Alpha\n\n{same}\n\n# Beta\n\n{same}\n",
                                       "x.md": "# Other\n\nPaper boats float.\n"})
    index(run_folio, root, srv.url)
    r = run_folio("query", "wind turbines evening breeze", "-l", "1", "--mode", "semantic", cwd=root)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1:] == ["    (top level)  (2 sections)"]
    assert re.fullmatch(r"#1  \d\.\d{3}  w\.md:1-7", r.stdout.splitlines()[0])
