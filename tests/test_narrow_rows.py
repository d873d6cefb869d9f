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
    # every section shares the title's "revenue": the question's list alone merges none of them
    # (rows.py: a file's floor), where it once gave lines 1-31 as one row
    assert faceted and all(end - start <= 3 for start, end in question), question
    for start, end in faceted:
        for plane in (question, alone):
            assert any(a <= start and end <= b for a, b in plane), (start, end, plane)


def test_a_question_in_a_documents_title_words_gets_its_sections_not_the_whole_document(tmp_path, write_tree,
                                                                                        run_folio):
    """BM25F scores a file's path and title for each of its sections alike: a question in the title's
    words scored every section of a long document within a tenth of each other, and lexical ranking
    (what answers with no server) merged them as they touched: 85 sections, 1,921 lines, as one row.
    A section now joins a row only on words of its own."""
    body = "\n".join(f"## Part {i}\n\nNotes on item {i}: the kubelet, the pod and the node {i}.\n"
                     for i in range(1, 13))
    body += "\n## Tuning\n\nThe max CrashLoopBackOff delay is set by the kubelet configuration.\n"
    root = tmp_path / "wiki"
    write_tree(root, {"configure-max-crashloopbackoff-delay.md": f"# Configure the max CrashLoopBackOff delay\n\n{body}",
                      "other.md": "# Other\n\nNothing about restarts here.\n"})
    r = run_folio("index", "--endpoint", "http://127.0.0.1:9/v1/embeddings", cwd=root)
    assert r.returncode == 0, r.stderr
    r = run_folio("query", "crashloopbackoff max delay configuration", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)["results"]
    assert all(h["pieces"] == 1 for h in got), [(h["ref"], h["pieces"]) for h in got]
    assert "Tuning" in [h["trail"][-1] for h in got[:3]], [h["ref"] for h in got]
