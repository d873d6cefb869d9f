"""Hybrid ranking (issue 10): reciprocal-rank fusion of the semantic and lexical rankings.

Through the real CLI against the deterministic fake embeddings server (which maps synonyms to one
token, so the semantic plane finds sections that share no word with the question and the lexical
plane does not), plus a unit test of the fusion arithmetic against hand-computed RRF.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

from folio import fusion

Q = "automobile repair shop"

# Built so the planes disagree (the premise is asserted before the fusion is checked):
# semantic: garage (only synonyms of the question) first, saturday second, the clutter last;
# lexical: the clutter (every question word in its heading) first, saturday second; garage and
# the two chores share no word with the question, so the lexical plane does not rank them.
DISAGREE = {
    "garage.md": "# Garage\n\nAuto mending.\n",
    "clutter.md": "# Automobile repair shop\n\nOpening hours, parking, coffee, waiting room, invoices, "
                  "receipts, warranty, tyres, seasons, weather, staff, uniforms, lunch, holidays, calendars, "
                  "phones, radios, lamps, doors, windows, floors, keys, signs, fees.\n",
    "saturday.md": "# Saturday\n\nCar repair and auto mending on Saturday.\n",
    "errands.md": "# Errands\n\nThe vehicle needs mending, and the dog needs a walk after dinner.\n",
    "chores.md": "# Chores\n\nMend the vehicle, then paint the gate and wash the windows.\n",
}


def backdate(root: Path, seconds: int = 10) -> None:
    past = time.time() - seconds
    for dirpath, _dirs, files in os.walk(root):
        if ".folio" not in dirpath:
            for f in files:
                os.utime(os.path.join(dirpath, f), (past, past))


def index(run_folio, root: Path, url: str):
    backdate(root)
    r = run_folio("index", "--endpoint", url, cwd=root)
    assert r.returncode == 0, r.stderr


def query(run_folio, cwd: Path, text: str, *extra, env=None) -> dict:
    r = run_folio("query", text, "--json", *extra, cwd=cwd, env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture(autouse=True)
def one_pass(monkeypatch):
    """These tests hold hybrid ranking to the RRF of one pass: feedback (a second semantic pass,
    on by default for hybrid) is off here and tested in test_feedback.py."""
    monkeypatch.setenv("FOLIO_FEEDBACK", "off")


@pytest.fixture
def disagree(tmp_path, write_tree, fake_server, run_folio):
    srv = fake_server()
    root = write_tree(tmp_path / "garage", DISAGREE)
    index(run_folio, root, srv.url)
    return root, srv


# --------------------------------------------------------------------------- the arithmetic


def test_rrf_matches_a_hand_computed_fusion():
    inf = -np.inf
    # semantic order: 2, 0, 3, 1 (4 unranked); lexical order: 1, then 2 and 4 tied (they share rank 2:
    # where a record is stored must not rank it), rest unranked
    sem = np.array([0.9, 0.1, 0.95, 0.5, inf], dtype=np.float32)
    lex = np.array([inf, 7.0, 3.0, inf, 3.0], dtype=np.float32)
    assert fusion.ranks(sem).tolist() == [2, 4, 1, 3, 0]
    assert fusion.ranks(lex).tolist() == [0, 1, 2, 0, 2]
    fused = fusion.rrf([fusion.ranks(sem), fusion.ranks(lex)], k=60)
    want = [1 / 62, 1 / 64 + 1 / 61, 1 / 61 + 1 / 62, 1 / 63, 1 / 62]
    assert fused.tolist() == pytest.approx(want, rel=1e-6)
    assert fusion.rrf([np.array([0, 1]), np.array([0, 0])])[0] == -np.inf  # ranked by neither plane
    # Two corpora rank as one: the second's best lexical record outranks the first's.
    scores, ranks = fusion.fuse([np.array([0.2, 0.8], np.float32), np.array([0.5], np.float32)],
                                [np.array([1.0, inf], np.float32), np.array([2.0, inf, 9.0], np.float32)])
    assert [r.tolist() for r in ranks] == [[[3, 1], [3, 0]], [[2, 0, 0], [2, 0, 1]]]
    assert scores[0].tolist() == pytest.approx([1 / 63 + 1 / 63, 1 / 61], rel=1e-6)
    assert scores[1][:2].tolist() == pytest.approx([1 / 62 + 1 / 62, -np.inf], rel=1e-6)
    assert scores[1][2] == pytest.approx(1 / 61, rel=1e-6)


def test_ranking_is_vectorised_and_stable_at_scale():
    rng = np.random.default_rng(7)
    n = 200_000
    sem = rng.random(n, dtype=np.float32)
    lex = np.where(rng.random(n) < 0.1, rng.integers(1, 5, n).astype(np.float32), -np.inf).astype(np.float32)
    r = fusion.ranks(lex)
    ranked = np.flatnonzero(r)
    assert np.count_nonzero(r) == np.count_nonzero(np.isfinite(lex))
    by_rank = ranked[np.argsort(r[ranked], kind="stable")]
    assert np.all(np.diff(lex[by_rank]) <= 0)  # descending score
    # equal scores share one rank, the best among them (competition ranking: 1, 1, 3 ...)
    for value in np.unique(lex[ranked]):
        tied = r[lex == value]
        assert len(set(tied.tolist())) == 1
        assert tied[0] == 1 + np.count_nonzero(lex > value)
    fused = fusion.rrf([fusion.ranks(sem), r])
    assert np.isfinite(fused).all() and fused.dtype == np.float32


# --------------------------------------------------------------------------- through the CLI


def test_hybrid_fuses_two_disagreeing_rankings(disagree, run_folio):
    root, _srv = disagree
    sem = [h["path"] for h in query(run_folio, root, Q, "--mode", "semantic", "-l", "10")["results"]]
    lex = [h["path"] for h in query(run_folio, root, Q, "--lexical", "-l", "10")["results"]]
    # The premise: each plane has another winner, and saturday.md is second in both.
    assert sem[:2] == ["garage.md", "saturday.md"] and sem.index("clutter.md") >= 3, sem
    assert lex == ["clutter.md", "saturday.md"], lex
    data = query(run_folio, root, Q, "--mode", "hybrid", "-l", "10")
    assert data["mode"] == "hybrid"

    def rrf(path):
        return sum(1 / (60 + order.index(path) + 1) for order in (sem, lex) if path in order)

    want = sorted(sem, key=lambda p: -rrf(p))  # every section is ranked semantically
    got = data["results"]
    assert [h["path"] for h in got] == want
    assert want[0] == "saturday.md"  # the section both planes put second beats each plane's own winner
    assert [h["score"] for h in got] == pytest.approx([rrf(p) for p in want], abs=2e-6)
    for h in got:
        assert h["ranks"] == {"semantic": sem.index(h["path"]) + 1,
                              "lexical": lex.index(h["path"]) + 1 if h["path"] in lex else None}
    # The human view says the same.
    r = run_folio("query", Q, "--mode", "hybrid", cwd=root)
    assert r.returncode == 0, r.stderr
    first = r.stdout.splitlines()[0]
    assert first == f"#1  {rrf('saturday.md'):.4f}  saturday.md:1-3  [semantic #2, lexical #2]"
    assert "garage.md:1-3  [semantic #1, lexical -]" in r.stdout
    # Other modes print no component ranks.
    assert "ranks" not in query(run_folio, root, Q, "--mode", "semantic", "-l", "2")["results"][0]


def test_lexical_flag_conflicting_with_mode_is_a_usage_error(disagree, run_folio):
    root, srv = disagree
    before = srv.stats()["requests"]
    r = run_folio("query", Q, "--lexical", "--mode", "hybrid", cwd=root)
    assert r.returncode == 2
    assert "--lexical" in r.stderr and "--mode hybrid" in r.stderr and "Traceback" not in r.stderr
    assert srv.stats()["requests"] == before
    r = run_folio("query", Q, "--mode", "fused", cwd=root)
    assert r.returncode == 2 and "fused" in r.stderr
    assert query(run_folio, root, Q, "--lexical", "--mode", "lexical")["mode"] == "lexical"


def test_hybrid_is_the_default_and_config_says_where_it_came_from(disagree, run_folio):
    root, _srv = disagree
    r = run_folio("config", cwd=root)
    assert r.returncode == 0, r.stderr
    assert "mode                hybrid  (default)" in r.stdout.splitlines()
    assert json.loads(run_folio("config", "--json", cwd=root).stdout)["settings"]["mode"] == {
        "value": "hybrid", "source": "default"}
    data = query(run_folio, root, Q)
    assert data["mode"] == "hybrid" and data["results"][0]["path"] == "saturday.md"
    assert data["results"][0]["ranks"] == {"semantic": 2, "lexical": 2}
    r = run_folio("query", Q, cwd=root)
    assert r.returncode == 0 and "[semantic #2, lexical #2]" in r.stdout.splitlines()[0]
    # the pipes print the same rows, in the same order
    paths = run_folio("query", Q, "--paths-only", cwd=root).stdout.splitlines()
    assert paths == [h["ref"] for h in data["results"]]
    assert run_folio("query", Q, "-0", cwd=root).stdout.split("\0")[:-1] == paths


def test_mode_from_folio_yaml_is_shown_by_config_and_used_by_query(disagree, run_folio):
    root, _srv = disagree
    (root / "folio.yaml").write_text("mode: hybrid\n")
    r = run_folio("config", cwd=root)
    assert r.returncode == 0, r.stderr
    assert "mode                hybrid  (folio.yaml)" in r.stdout.splitlines()
    cfg = json.loads(run_folio("config", "--json", cwd=root).stdout)
    assert cfg["settings"]["mode"] == {"value": "hybrid", "source": "folio.yaml"}
    sub = root / "deeper"
    sub.mkdir()
    data = query(run_folio, sub, Q)  # found by walking up, like every other setting
    assert data["mode"] == "hybrid" and data["results"][0]["path"] == "saturday.md"
    assert data["results"][0]["ranks"] == {"semantic": 2, "lexical": 2}
    # A flag beats the file; the environment beats the file too.
    assert query(run_folio, root, Q, "--mode", "semantic")["results"][0]["path"] == "garage.md"
    assert query(run_folio, root, Q, "--lexical")["mode"] == "lexical"
    env_run = query(run_folio, root, Q, env={"FOLIO_MODE": "semantic"})
    assert env_run["mode"] == "semantic"
    cfg = json.loads(run_folio("config", "--json", cwd=root, env={"FOLIO_MODE": "lexical"}).stdout)
    assert cfg["settings"]["mode"] == {"value": "lexical", "source": "env FOLIO_MODE"}
    # `folio config set --project` writes it; a wrong value is one sentence naming the file.
    assert run_folio("config", "set", "--project", "mode", "lexical", cwd=root).returncode == 0
    assert "mode: lexical" in (root / "folio.yaml").read_text()
    (root / "folio.yaml").write_text("mode: fusion\n")
    r = run_folio("query", Q, cwd=root)
    assert r.returncode == 1
    assert r.stderr.startswith(f"folio: {root / 'folio.yaml'}: `mode` must be semantic, lexical or hybrid")
    assert "Traceback" not in r.stderr


def test_hybrid_degrades_to_lexical_when_the_server_is_down(disagree, run_folio):
    root, srv = disagree
    lexical = query(run_folio, root, Q, "--lexical", "-l", "10")
    srv.kill()
    r = run_folio("query", Q, "--mode", "hybrid", "--json", "-l", "10", cwd=root)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["mode"] == "lexical"
    assert any("does not answer: ranking lexically" in n for n in data["notices"])
    assert "does not answer: ranking lexically" in r.stderr
    assert [h["ref"] for h in data["results"]] == [h["ref"] for h in lexical["results"]]
    assert all("ranks" not in h for h in data["results"])
    # Set by folio.yaml, the same.
    (root / "folio.yaml").write_text("mode: hybrid\n")
    r = run_folio("query", Q, cwd=root)
    assert r.returncode == 0 and r.stdout.startswith("#1  ") and "clutter.md:1-3" in r.stdout.splitlines()[0]
    assert "ranking lexically" in r.stderr


STEP = "## Step {i}\n\n{body}\n\n\n"
STEPS = ["Feed the sourdough starter with flour and water.",
         "Feed the sourdough starter with flour and water.\nStir the sourdough starter well.",
         "Feed the sourdough starter with flour and water.\nKeep the sourdough starter warm.\nCover the jar.",
         "Feed the sourdough starter with flour and water."]
BREAD = "# Baking bread\n\nOvens and loaves.\n\n" + "".join(STEP.format(i=i, body=b) for i, b in enumerate(STEPS, 1))
GARDEN = ("# Garden\n\nTomatoes need sun and water daily.\n\n## Sourdough note\n\n"
          "The sourdough starter smells sour when hungry.\n\n## Compost\n\nLeaves turn into compost.\n")


def test_hybrid_merges_touching_rows_only_where_both_planes_would(tmp_path, write_tree, fake_server, run_folio):
    srv = fake_server()
    root = write_tree(tmp_path / "kitchen", {"bread.md": BREAD, "garden.md": GARDEN})
    index(run_folio, root, srv.url)
    q = "feed the sourdough starter with flour and water"
    rows = {m: query(run_folio, root, q, "--mode", m, "-l", "3")["results"] for m in ("lexical", "semantic", "hybrid")}
    lines = BREAD.split("\n")
    step = [lines.index(f"## Step {i}") + 1 for i in range(1, 5)]
    end = len(BREAD.rstrip("\n").split("\n"))
    # The premise: the lexical plane would merge the four steps, the semantic plane sets step 4 apart.
    assert (rows["lexical"][0]["start"], rows["lexical"][0]["end"], rows["lexical"][0]["pieces"]) == (step[0], end, 4)
    assert [(h["start"], h["pieces"]) for h in rows["semantic"][:2]] == [(step[3], 1), (step[0], 3)]
    # Fused scores of ranks 1 to 8 sit within 10% of each other, yet the hybrid row is no wider than
    # the rows of the planes that earned it: step 4 alone, then steps 1 to 3 merged.
    top, second = rows["hybrid"][:2]
    assert (top["path"], top["start"], top["end"], top["pieces"]) == ("bread.md", step[3], end, 1)
    assert (second["path"], second["start"], second["end"], second["pieces"]) == ("bread.md", step[0], step[3] - 3, 3)
    assert second["trail"] == ["Baking bread"]
    assert second["ranks"] == {"semantic": 2, "lexical": 1}  # a merged row: its pieces' best ranks
    # The row's score is the line-weighted mean of its pieces' fused scores, as in the other modes.
    assert 2 / 70 < second["score"] <= 2 / 61
    # --limit counts merged rows in hybrid mode too.
    assert len(rows["hybrid"]) == 3 and len({(h["path"], h["start"]) for h in rows["hybrid"]}) == 3


def test_hybrid_refreshes_a_changed_file_and_cites_it(disagree, run_folio):
    root, _srv = disagree
    path = root / "saturday.md"
    path.write_text("# Intro\n\nNothing here.\n\n# Saturday\n\nCar repair and auto mending on Saturday.\n")
    r = run_folio("query", Q, "--mode", "hybrid", "--json", "--no-refresh", cwd=root)
    stale = json.loads(r.stdout)["results"][0]
    assert (stale["path"], stale["freshness"], stale["ref"]) == ("saturday.md", "stale", "saturday.md:1-3")
    r = run_folio("query", Q, "--mode", "hybrid", "--no-refresh", cwd=root)
    assert r.stdout.splitlines()[0].startswith("#1  ") and "saturday.md:1-3 (stale)  [semantic" in r.stdout
    r = run_folio("query", Q, "--mode", "hybrid", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert any("re-embedded before answering" in n for n in data["notices"])
    top = data["results"][0]
    assert (top["ref"], top["freshness"]) == ("saturday.md:5-7", "current")
    assert top["citation"] == {"loc": "saturday.md:L5-L7", "freshness": "current",
                               "sha": hashlib.sha256(path.read_bytes()).hexdigest()[:12]}
    assert top["ranks"] == {"semantic": 2, "lexical": 2}


def test_hybrid_ranks_across_several_roots_as_one(tmp_path, write_tree, fake_server, run_folio):
    srv = fake_server()
    files = sorted(DISAGREE)
    a = write_tree(tmp_path / "a", {f: DISAGREE[f] for f in files[:3]})
    b = write_tree(tmp_path / "b", {f: DISAGREE[f] for f in files[3:]})
    whole = write_tree(tmp_path / "whole", DISAGREE)
    for root in (a, b, whole):
        index(run_folio, root, srv.url)
    one = query(run_folio, whole, Q, "--mode", "hybrid", "-l", "10")["results"]
    both = query(run_folio, tmp_path, Q, "--mode", "hybrid", "-l", "10", "--root", str(a), "--root", str(b))
    got = both["results"]
    assert [h["path"] for h in got] == [h["path"] for h in one]
    assert [h["ranks"] for h in got] == [h["ranks"] for h in one]
    assert {h["root"] for h in got} == {str(a), str(b)}


FILTERED = {
    "live.md": "---\nid: kep-2\nstatus: live\nsupersedes: kep-1\n---\n# Saturday\n\n"
               "Car repair and auto mending on Saturday.\n",
    "old.md": "---\nid: kep-1\nstatus: live\n---\n# Garage\n\nAuto mending.\n",
    "draft.md": "---\nid: kep-3\nstatus: draft\n---\n# Automobile repair shop\n\nOpening hours and parking.\n",
    "other.md": "---\nid: kep-4\nstatus: live\n---\n# Chores\n\nMend the vehicle, then paint the gate.\n",
}


@pytest.fixture
def filtered(tmp_path, write_tree, fake_server, run_folio):
    pytest.importorskip("folio.filters", reason="the filters module (issue: filters) has not landed on this branch")
    srv = fake_server()
    root = write_tree(tmp_path / "keps", FILTERED)
    index(run_folio, root, srv.url)
    return root


def test_hybrid_fuses_only_what_the_filter_keeps(filtered, run_folio):
    root = filtered
    everything = query(run_folio, root, Q, "--mode", "hybrid", "-l", "10")["results"]
    assert "draft.md" in [h["path"] for h in everything]
    data = query(run_folio, root, Q, "--mode", "hybrid", "-l", "10", "--where", "status=live")
    got = data["results"]
    assert [h["path"] for h in got if h["frontmatter"]["status"] != "live"] == []
    assert len(got) == 3
    # A filtered record takes no rank in either plane: the kept ones rank 1..n among themselves.
    assert sorted(h["ranks"]["semantic"] for h in got) == [1, 2, 3]
    lexical_ranks = sorted(h["ranks"]["lexical"] for h in got if h["ranks"]["lexical"])
    assert lexical_ranks == list(range(1, len(lexical_ranks) + 1))
    semantic = query(run_folio, root, Q, "--mode", "semantic", "-l", "10", "--where", "status=live")["results"]
    lexical = query(run_folio, root, Q, "--lexical", "-l", "10", "--where", "status=live")["results"]
    for h in got:
        assert h["ranks"]["semantic"] == [x["path"] for x in semantic].index(h["path"]) + 1
        lex = [x["path"] for x in lexical]
        assert h["ranks"]["lexical"] == (lex.index(h["path"]) + 1 if h["path"] in lex else None)


def test_hybrid_applies_the_join_and_says_how_many_it_dropped(filtered, run_folio):
    root = filtered
    r = run_folio("query", Q, "--mode", "hybrid", "--json", "-l", "10", "--exclude-pointed-by", "supersedes",
                  cwd=root)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["dropped"] == 1 and "1 document dropped" in r.stderr
    paths = [h["path"] for h in data["results"]]
    assert sorted(paths) == ["draft.md", "live.md", "other.md"]  # old.md, superseded by kep-2, is gone
    assert sorted(h["ranks"]["semantic"] for h in data["results"]) == [1, 2, 3]
