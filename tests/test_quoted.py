"""A question that quotes the corpus (issue 39 item 2: "the corpus's own words"), through the real CLI
against the fake embeddings server (bag of words with synonym groups: "mend" is "repair" to it,
"commence" is "begin").

BM25F counts words, not their order: a section holding the question's sentence word for word and one
holding the same words in another order score within a few percent, so the lexical plane is not
decisive by separation, and meaning can put a paraphrase first. When the lexical plane's best
section holds most of the question's adjacent word pairs in their order (and twice as many as the
next), the default ranking follows it and feedback steps aside.
"""

from __future__ import annotations

from helpers import indexed
from test_decisive import (  # GARDEN: eighty sections on something else, so a word in one is rare
    GARDEN,
    ask,
)

Q = "the worker must repair the broken ledger before it can begin a new batch"
OPS = {
    # The answer: the sentence the question remembers, word for word, inside a longer paragraph.
    "ops/ledger.md": "# Ledger recovery\n\nAfter a crash the ledger is checked block by block, and the checksums are "
                     "compared with the\njournal kept beside it. The worker must repair the broken ledger before it "
                     "can begin a new batch;\nuntil then every write is refused and the queue fills.\n",
    # The same words in another order: BM25F scores it within a few percent of the answer.
    "ops/batches.md": "# Batches\n\nA new batch can begin when the worker is idle and the queue holds at least one "
                      "job. A broken\nledger is rare; repair it with the ledger tool, then the worker picks up where "
                      "it stopped.\n",
    # A paraphrase in synonyms: meaning ranks it first.
    "ops/mend.md": "# Mending\n\nMend the broken ledger before it can commence a new batch; the worker waits.\n",
}


def paths(got: dict) -> list[str]:
    return [r["path"] for r in got["results"]]


def test_a_question_quoting_a_section_gets_that_section_first(tmp_path, fake_server, run_folio):
    root = indexed(tmp_path / "c", {**OPS, **GARDEN}, fake_server(), run_folio)
    assert paths(ask(run_folio, root, "--mode", "semantic", question=Q))[0] == "ops/mend.md"
    lexical = ask(run_folio, root, "--mode", "lexical", question=Q)
    assert paths(lexical)[:2] == ["ops/ledger.md", "ops/batches.md"]
    assert lexical["confidence"]["band"] != "grounded"  # not decisive by separation: a few percent ahead
    got = ask(run_folio, root, question=Q)
    assert paths(got)[0] == "ops/ledger.md", paths(got)
    assert got["results"][0]["ranks"] == {"semantic": 2, "lexical": 1}
    assert got["feedback"] is False  # the quote stands: no second semantic pass
    # The word order is what decided it: with the rule off (an evaluation knob) the paraphrase leads.
    plain = ask(run_folio, root, question=Q, env={"FOLIO_FUSION_QUOTED": "0"})
    assert paths(plain)[0] == "ops/mend.md" and plain["feedback"] is True


def test_a_short_question_or_one_in_other_words_fuses_as_before(tmp_path, fake_server, run_folio):
    root = indexed(tmp_path / "c", {**OPS, **GARDEN}, fake_server(), run_folio)
    # Two word pairs ("repair broken", "broken ledger") are no quote: too few to tell order from chance.
    assert ask(run_folio, root, question="repair the broken ledger")["feedback"] is True
    # The same words in another order than any section's: nothing is quoted.
    assert ask(run_folio, root, question="a batch begins new when the ledger, broken, is repaired by the "
                                         "worker")["feedback"] is True
