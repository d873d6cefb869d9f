"""The answer a section search owes (issue 39): a default row no wider than the sections that earned it.

Through the real CLI, in the default mode (hybrid, feedback auto), against the fake embeddings
server and the real llama-server (all-MiniLM-L6-v2). Fused scores were once reciprocal ranks, within
a few percent of each other all down a ranking; merging touching rows by them alone answered a
37-line file of ten sections with the whole file. Each plane's own scores judge merging now.
"""

from __future__ import annotations

import json

from helpers import indexed

# Ten short sections on one subject: every one shares a word with the question.
REVENUE = """# Revenue

How the company accounts for revenue from its contracts with customers.

## Scope

This policy covers revenue from every contract with a customer, in every region.

## Contracts

A contract exists once both parties approve it and the payment terms are clear.

## Performance obligations

Each promise to transfer a distinct good or service is a separate obligation.

## Transaction price

The price is the consideration the company expects in exchange for the goods.

## Allocation

The price is allocated to each obligation by its standalone selling price.

## Variable consideration

Discounts, rebates and refunds are estimated and included in the price.

## Disclosures

The notes disaggregate revenue by region, product line and contract length.

## Recognition

## Timing

Revenue is recognised when control passes to the customer, at a point in time or over time.
"""
Q = "when is revenue recognised"


def rows(run_folio, root, *mode) -> list[tuple[int, int]]:
    r = run_folio("query", Q, "--json", "-l", "10", *mode, cwd=root)
    assert r.returncode == 0, r.stderr
    return [(h["start"], h["end"]) for h in json.loads(r.stdout)["results"]]


def test_a_default_row_is_never_wider_than_the_rows_of_the_planes_that_earned_it(tmp_path, fake_server,
                                                                                  run_folio):
    root = indexed(tmp_path / "policy", {"revenue.md": REVENUE}, fake_server(), run_folio)
    default = rows(run_folio, root)
    planes = [rows(run_folio, root, "--mode", m) for m in ("semantic", "lexical")]
    assert len(REVENUE.splitlines()) == 37 and default
    # Every default row lies inside one row of each plane ranking alone.
    for start, end in default:
        for plane in planes:
            assert any(a <= start and end <= b for a, b in plane), (start, end, plane)
    assert (1, 37) not in default


def test_the_ten_section_file_answers_with_the_timing_section(tmp_path, llama, run_folio):
    root = indexed(tmp_path / "policy", {"revenue.md": REVENUE}, llama, run_folio)
    r = run_folio("query", Q, "-l", "3", cwd=root)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].split()[2] == "revenue.md:35-37", r.stdout  # the Timing section alone
    assert rows(run_folio, root, "--mode", "semantic")[0] == (35, 37)


def test_a_row_ranked_with_a_facet_is_never_wider_than_the_rows_of_each_list_alone(tmp_path, fake_server,
                                                                                 run_folio):
    # The words rank as a lexical list of their own, fused with the question's: a row merges only
    # where the question's list and the words' list, each ranking alone, would both merge it.
    root = indexed(tmp_path / "policy", {"revenue.md": REVENUE}, fake_server(), run_folio)
    words = "revenue price"
    faceted = rows(run_folio, root, "--mode", "lexical", "--words", words)
    question = rows(run_folio, root, "--mode", "lexical")
    r = run_folio("query", words, "--json", "-l", "10", "--mode", "lexical", cwd=root)
    assert r.returncode == 0, r.stderr
    alone = [(h["start"], h["end"]) for h in json.loads(r.stdout)["results"]]
    assert faceted and (1, 31) in question  # the question's list alone merges the first 31 lines
    for start, end in faceted:
        for plane in (question, alone):
            assert any(a <= start and end <= b for a, b in plane), (start, end, plane)
