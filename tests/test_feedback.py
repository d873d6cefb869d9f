"""Pseudo-relevance feedback (issue 28): hybrid ranking moves the question's vector toward its first
pass's best sections and ranks the semantic plane again, without asking the server again.

Through the real CLI against the deterministic fake embeddings server. `lounge.md` shares no word
with the question, only with one of its best sections (`clutter.md`); `spanners.md` shares words
only with another (`saturday.md`), fewer of them. Without feedback both score a semantic 0 and tie;
with it, the moved vector ranks each by what it shares with the best sections.
"""

from __future__ import annotations

import json

import pytest
from test_hybrid import backdate, by_hand

Q = "automobile repair shop"
TREE = {
    "garage.md": "# Garage\n\nAuto mending.\n",
    "clutter.md": "# Automobile repair shop\n\nOpening hours, parking, coffee, waiting room, invoices, receipts, "
                  "warranty, tyres, seasons.\n",
    "saturday.md": "# Saturday\n\nCar repair and auto mending on Saturday, with spanners and grease.\n",
    "lounge.md": "# Lounge\n\nOpening hours, parking, coffee, waiting room, invoices, receipts.\n",
    "spanners.md": "# Tools\n\nSpanners and grease, spanners and grease on Saturday.\n",
    "errands.md": "# Errands\n\nThe vehicle needs mending, and the dog needs a walk after dinner.\n",
    "chores.md": "# Chores\n\nMend the vehicle, then paint the gate and wash the windows.\n",
}


@pytest.fixture
def shop(tmp_path, write_tree, fake_server, run_folio):
    srv = fake_server()
    root = write_tree(tmp_path / "shop", TREE)
    backdate(root)
    r = run_folio("index", "--endpoint", srv.url, cwd=root)
    assert r.returncode == 0, r.stderr
    return root, srv


def ask(run_folio, root, *extra, env=None) -> dict:
    r = run_folio("query", Q, "--json", "-l", "10", *extra, cwd=root, env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_hybrid_feedback_reranks_from_the_best_sections_without_a_second_request(shop, run_folio):
    root, srv = shop
    off = ask(run_folio, root, "--mode", "hybrid", env={"FOLIO_FEEDBACK": "off"})
    assert off["feedback"] is False
    paths = [h["path"] for h in off["results"]]
    # The premise: the two sections that share no word with the question tie without feedback.
    lounge, spanners = (off["results"][paths.index(p)] for p in ("lounge.md", "spanners.md"))
    assert lounge["score"] == spanners["score"] and lounge["ranks"] == spanners["ranks"]

    before = srv.stats()["requests"]
    on = ask(run_folio, root, "--mode", "hybrid")  # feedback: auto, the default, gives hybrid ranking feedback
    assert srv.stats()["requests"] == before + 1  # the question's one request: feedback asks nothing more
    assert on["feedback"] is True and on["mode"] == "hybrid"
    got = {h["path"]: h for h in on["results"]}
    assert got["lounge.md"]["score"] > got["spanners.md"]["score"]
    assert got["lounge.md"]["ranks"]["semantic"] < got["spanners.md"]["ranks"]["semantic"]
    assert [h["path"] for h in on["results"]][:3] == paths[:3]  # the best sections stay the best
    # The human view carries the second pass's semantic ranks.
    r = run_folio("query", Q, "--mode", "hybrid", "-l", "10", cwd=root)
    assert r.returncode == 0, r.stderr
    sem = got["lounge.md"]["ranks"]["semantic"]
    assert any("lounge.md:1-3" in line and f"[semantic #{sem}, lexical -]" in line for line in r.stdout.splitlines())


def test_semantic_ranking_is_unchanged_unless_feedback_is_asked_for(shop, run_folio):
    root, srv = shop
    plain = ask(run_folio, root, "--mode", "semantic", env={"FOLIO_FEEDBACK": "off"})
    default = ask(run_folio, root, "--mode", "semantic")
    assert default["feedback"] is False and default["results"] == plain["results"]
    asked = ask(run_folio, root, "--mode", "semantic", env={"FOLIO_FEEDBACK": "on"})
    assert asked["feedback"] is True
    assert [h["score"] for h in asked["results"]] != [h["score"] for h in plain["results"]]
    # Lexical ranking has no vectors to move; a server that is down leaves nothing to feed back.
    assert ask(run_folio, root, "--lexical", env={"FOLIO_FEEDBACK": "on"})["feedback"] is False
    srv.kill()
    down = ask(run_folio, root, "--mode", "hybrid")
    assert down["mode"] == "lexical" and down["feedback"] is False


def test_feedback_setting_from_folio_yaml_and_config(shop, run_folio):
    root, _srv = shop
    (root / "folio.yaml").write_text("feedback: on\n")  # YAML reads a bare on as true: the same
    assert ask(run_folio, root, "--mode", "semantic")["feedback"] is True
    cfg = json.loads(run_folio("config", "--json", cwd=root).stdout)
    assert cfg["settings"]["feedback"] == {"value": "on", "source": "folio.yaml"}
    assert ask(run_folio, root, "--mode", "hybrid", env={"FOLIO_FEEDBACK": "0"})["feedback"] is False
    (root / "folio.yaml").write_text("feedback: sometimes\n")
    r = run_folio("query", Q, cwd=root)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.startswith(f"folio: {root / 'folio.yaml'} line 1: `feedback` must be auto, on or off")


def test_a_half_built_index_keeps_its_unembedded_section_in_the_top_rows_with_feedback(shop, run_folio):
    root, srv = shop
    (root / "ledger.md").write_text("# Ledger\n\nAutomobile repair invoices for POISON accounts, repair shop ledger.\n")
    backdate(root)
    srv.control(fail_input_containing="POISON", fail_input_fault="500")
    r = run_folio("index", cwd=root)
    assert r.returncode == 0 and "ledger.md:1-3: not embedded" in r.stderr
    srv.control(fail_input_containing=None)
    got = ask(run_folio, root, "--mode", "hybrid")
    assert got["feedback"] is True and got["mode"] == "hybrid"
    # one of each, said so (it said `(in 1 files) have`), in the notice and in `folio status`
    assert any("1 of the 8 sections (in 1 file) has no vectors yet, so only its words rank it" in n
               for n in got["notices"]), got["notices"]
    status = run_folio("status", cwd=root).stdout
    assert "note: 1 section in 1 file has no vectors yet" in status and "ranks them by their words only" in status
    # The section without a vector ranks by its words (its lexical rank standing in for the
    # semantic one): feedback leaves its first-pass score alone and feeds back only embedded sections.
    top = {h["path"]: h for h in got["results"][:3]}
    assert "ledger.md" in top and top["ledger.md"]["ranks"]["semantic"] is None
    assert "clutter.md" in top


def test_evaluation_knobs_let_a_decisive_lexical_plane_lead_and_feedback_step_aside(shop, run_folio):
    # Every word of the question is clutter.md's heading, and no other section holds more than one
    # of them: the lexical plane is grounded. By default that changes nothing here (in a corpus this
    # small no word is rare: evidence.RARE); the evaluation knobs drop that condition, weigh the
    # semantic plane down and keep the first pass.
    root, _srv = shop
    plain = ask(run_folio, root)
    assert plain["feedback"] is True
    led = ask(run_folio, root, env={"FOLIO_FUSION_STEP_BACK": "0.5", "FOLIO_FUSION_ASIDE": "1",
                                    "FOLIO_FUSION_RARE": "0"})
    assert led["feedback"] is False
    top = led["results"][0]
    assert top["path"] == "clutter.md" and top["ranks"]["lexical"] == 1
    # the first pass, the semantic plane's share halved: by hand from each plane's own scores
    cos = {h["path"]: h["score"] for h in ask(run_folio, root, "--mode", "semantic")["results"]}
    bm25 = {h["path"]: h["score"] for h in ask(run_folio, root, "--lexical")["results"]}
    s_share = dict(zip(cos, by_hand(list(cos.values())), strict=True))
    l_share = dict(zip(bm25, by_hand(list(bm25.values()), room=len(TREE)), strict=True))
    assert top["score"] == pytest.approx(0.5 * s_share["clutter.md"] + l_share["clutter.md"], abs=1e-4)
    first = ask(run_folio, root, env={"FOLIO_FEEDBACK": "off"})["results"][0]
    assert first["path"] == "clutter.md"
    assert first["score"] == pytest.approx(s_share["clutter.md"] + l_share["clutter.md"], abs=1e-4)  # whole
