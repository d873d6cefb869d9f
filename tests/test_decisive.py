"""Fusion that follows the plane that is sure (issue 39 item 2), through the real CLI against the fake
embeddings server (bag of words with synonym groups: "shut" and "close", "fast" and "quick" are one
token to it, and it knows nothing of how rare a word is).

When the lexical plane is decisive (every word of the question known, one of them rare in the
corpus, the best section holding most of the question's word weight and standing well ahead of the
next) the default ranking follows it and feedback steps aside; otherwise the two planes fuse at
their weights. On a small corpus no word is rare, so a small corpus's ranking is plain fusion.
"""

from __future__ import annotations

import json

from helpers import indexed

Q = "shut the grpc daemon fast"
OPS = {
    # The answer: the only section naming the grpc daemon, in its own words.
    "ops/drain.md": "# Draining\n\nThe grpc daemon drains its streams, flushes metrics, rotates logs and checkpoints "
                    "its state; to shut it, send SIGTERM and wait.\n",
    # Generic: the same meaning in synonyms ("close", "quick"), so meaning ranks it first.
    "ops/close.md": "# Closing quickly\n\nClose the daemon quickly: a quick close.\n",
    "ops/stop.md": "# Stopping\n\nA quick close of the daemon, its sockets, its timers, its caches and its queues, in "
                   "that order.\n",
    "ops/speed.md": "# Speed\n\nThe cache makes reads fast.\n",
}
# Eighty sections on something else: enough that a word found in one section is rare.
GARDEN = {f"garden/bed{i:02d}.md": "".join(f"# Bed {i} row {j}\n\nTomatoes, basil and marigolds grow fast in row {j} "
                                           f"of bed {i}.\n\n" for j in range(4)) for i in range(20)}


def ask(run_folio, root, *args, question: str = Q, env=None) -> dict:
    r = run_folio("query", question, "--json", "-l", "3", *args, cwd=root, env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_a_decisive_lexical_plane_leads_the_default_ranking_and_feedback_steps_aside(tmp_path, fake_server,
                                                                                     run_folio):
    root = indexed(tmp_path / "c", {**OPS, **GARDEN}, fake_server(), run_folio)
    assert ask(run_folio, root, "--mode", "semantic")["results"][0]["path"] == "ops/close.md"
    assert ask(run_folio, root, "--mode", "lexical")["results"][0]["path"] == "ops/drain.md"
    got = ask(run_folio, root)
    first = got["results"][0]
    assert first["path"] == "ops/drain.md", [r["path"] for r in got["results"]]
    assert first["ranks"] == {"semantic": 3, "lexical": 1}
    assert got["feedback"] is False  # the first pass was decisive: no second semantic pass


def test_on_a_small_corpus_no_word_is_rare_and_both_planes_still_count(tmp_path, fake_server, run_folio):
    # The four sections alone. Lexically the question is as sure as can be (its every word in one
    # section, which stands far ahead); but in four sections no word is rare, so word statistics
    # cannot say the semantic plane is wrong: both planes keep their weight and feedback runs. (The
    # lexical plane's first still leads the fusion here: it stands far out of its own list.)
    question = "shut the grpc daemon"
    root = indexed(tmp_path / "c", OPS, fake_server(), run_folio)
    lexical = ask(run_folio, root, "--mode", "lexical", question=question)
    assert lexical["results"][0]["path"] == "ops/drain.md" and lexical["confidence"]["band"] == "grounded"
    got = ask(run_folio, root, question=question)
    assert got["feedback"] is True
    # Without the rare-word condition (an evaluation knob) the plane would be decisive: the semantic
    # plane would weigh nothing, feedback would step aside, and every row would score less.
    led = ask(run_folio, root, question=question, env={"FOLIO_FUSION_RARE": "0"})
    assert led["feedback"] is False
    assert [r["path"] for r in got["results"]] == [r["path"] for r in led["results"]]
    for mine, theirs in zip(got["results"], led["results"], strict=True):
        assert mine["score"] > theirs["score"], (mine, theirs)
    close = next(r for r in got["results"] if r["path"] == "ops/close.md")
    assert close["ranks"]["semantic"] == 1 and got["results"][1]["path"] == "ops/close.md"
