"""The fake embeddings server (tests/fakeserver.py) and the shared harness in conftest."""

from __future__ import annotations

import base64

import httpx
import numpy as np
import pytest
from helpers import first_n_files


def _embed(srv, texts, **extra):
    r = httpx.post(srv.url, json={"input": texts, "model": "m", **extra}, timeout=10)
    return r


def _vecs(resp) -> np.ndarray:
    data = sorted(resp.json()["data"], key=lambda d: d["index"])
    return np.array([d["embedding"] for d in data], dtype=np.float32)


def test_shape_health_models_tokenize(fake_server):
    srv = fake_server(dim=64)
    assert httpx.get(srv.base + "/health").json() == {"status": "ok"}
    meta = httpx.get(srv.base + "/v1/models").json()["data"][0]["meta"]
    assert meta["n_embd"] == 64 and meta["n_ctx"] > 0 and meta["n_ctx_train"] > 0
    r = _embed(srv, ["hello world", "x"])
    body = r.json()
    assert r.status_code == 200 and body["object"] == "list" and body["model"] == "m"
    assert [d["index"] for d in body["data"]] == [0, 1]
    assert all(d["object"] == "embedding" and len(d["embedding"]) == 64 for d in body["data"])
    # ceil(11/4)+2 + ceil(1/4)+2
    assert body["usage"] == {"prompt_tokens": 5 + 3, "total_tokens": 8}
    assert np.allclose(np.linalg.norm(_vecs(r), axis=1), 1.0, atol=1e-5)
    t = httpx.post(srv.base + "/tokenize", json={"content": "hello world"}).json()
    assert len(t["tokens"]) == 3
    t = httpx.post(srv.base + "/tokenize", json={"content": "hello world", "add_special": True})
    assert len(t.json()["tokens"]) == 5
    assert _embed(srv, "single string").json()["data"][0]["index"] == 0


def test_deterministic_across_processes(fake_server):
    texts = ["The borrow checker rejects this", "", "!!! ???"]
    a, b = fake_server(), fake_server()
    va, vb = _vecs(_embed(a, texts)), _vecs(_embed(b, texts))
    assert np.array_equal(va, vb)
    assert np.array_equal(va, _vecs(_embed(a, texts)))
    # empty and punctuation-only inputs: the same fixed, non-zero unit vector
    assert np.linalg.norm(va[1]) == pytest.approx(1.0, abs=1e-5)
    assert np.array_equal(va[1], va[2])


def test_synonyms_land_closer_than_unrelated(fake_server):
    srv = fake_server(dim=768)
    pairs = [
        ("my car will not start", "the automobile does not begin", "stock prices rose sharply"),
        ("how to delete a file", "erasing files from the disk", "a recipe for tomato soup"),
        ("a huge house", "big homes and dwellings", "quick sort implementation"),
        ("revenue grew", "income and earnings growth", "the cat sat on the mat"),
    ]
    for q, syn, unrelated in pairs:
        v = _vecs(_embed(srv, [q, syn, unrelated]))
        assert v[0] @ v[1] > v[0] @ v[2] + 0.2, (q, syn, unrelated)


def test_base64_equals_floats(fake_server):
    srv = fake_server(dim=96)
    texts = ["alpha beta", "gamma delta epsilon"]
    floats = _vecs(_embed(srv, texts))
    data = _embed(srv, texts, encoding_format="base64").json()["data"]
    b64 = np.stack([np.frombuffer(base64.b64decode(d["embedding"]), dtype="<f4") for d in data])
    assert np.array_equal(floats, b64)
    ignoring = fake_server(dim=96, no_base64=True)
    got = _embed(ignoring, texts, encoding_format="base64")
    assert isinstance(got.json()["data"][0]["embedding"], list)
    rejecting = fake_server(dim=96, base64_mode="reject")
    assert _embed(rejecting, texts, encoding_format="base64").status_code == 400


def test_max_tokens_fails_whole_request_with_llama_body(fake_server):
    srv = fake_server(max_tokens=512)
    long_text = "x" * (4 * 512)  # ceil(2048/4)+2 = 514 tokens
    r = _embed(srv, ["short", long_text])
    assert r.status_code == 500
    assert r.json() == {"error": {"code": 500, "message": "input (514 tokens) is too large to "
                        "process. increase the physical batch size (current batch size: 512)",
                        "type": "server_error"}}  # fmt: skip
    assert _embed(srv, ["short", "x" * (4 * 510)]).status_code == 200
    ctx = fake_server(n_ctx=100)
    r = _embed(ctx, "y" * 400)
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["type"] == "exceed_context_size_error" and err["n_prompt_tokens"] == 102
    assert err["n_ctx"] == 100


def test_max_inputs_413(fake_server):
    srv = fake_server(max_inputs=4)
    assert _embed(srv, ["a"] * 4).status_code == 200
    r = _embed(srv, ["a"] * 5)
    assert r.status_code == 413 and "maximum allowed batch size 4" in r.json()["error"]


def test_stats_count_requests_and_inputs(fake_server):
    srv = fake_server()
    assert srv.stats()["inputs"] == 0
    _embed(srv, ["a", "b", "c"])
    _embed(srv, "d")
    st = srv.stats()
    assert (st["requests"], st["ok"], st["inputs"], st["max_batch"]) == (2, 2, 4, 3)
    assert st["models"] == ["m"]
    srv.control(reset_stats=True)
    assert srv.stats()["requests"] == 0


def test_space_changes_vectors(fake_server):
    a, b = fake_server(space="a"), fake_server(space="b")
    texts = ["ownership and borrowing", "lifetimes"]
    va, vb = _vecs(_embed(a, texts)), _vecs(_embed(b, texts))
    assert float(np.min(np.sum(va * vb, axis=1))) < 0.9
    a.control(space="b")  # same URL, different "model"
    assert np.array_equal(_vecs(_embed(a, texts)), vb)


def test_control_faults_and_fail_after(fake_server):
    srv = fake_server(dim=32)
    srv.control(fail="500", times=2)
    assert [_embed(srv, "a").status_code for _ in range(3)] == [500, 500, 200]
    srv.control(fail="503", times=1)
    r = _embed(srv, "a")
    assert r.status_code == 503 and r.json()["error"]["message"] == "Loading model"
    srv.control(fail="429", times=1, retry_after=0)
    r = _embed(srv, "a")
    assert r.status_code == 429 and r.headers["retry-after"] == "0"
    srv.control(fail="wrong_count", times=1)
    assert len(_embed(srv, ["a", "b"]).json()["data"]) == 1
    srv.control(fail="wrong_dim", times=1)
    assert len(_embed(srv, "a").json()["data"][0]["embedding"]) == 31
    srv.control(fail="zero", times=1)
    assert not any(_embed(srv, "a").json()["data"][0]["embedding"])
    srv.control(fail="not_json", times=1)
    with pytest.raises(ValueError):
        _embed(srv, "a").json()
    srv.control(fail="disconnect", times=1)
    with pytest.raises(httpx.TransportError):
        _embed(srv, "a")
    srv.control(fail="timeout", times=1, hang_s=5)
    with pytest.raises(httpx.TimeoutException):
        httpx.post(srv.url, json={"input": "a", "model": "m"}, timeout=0.3)
    srv.control(fail=None)
    assert _embed(srv, "a").status_code == 200
    st = srv.stats()
    assert st["ok"] == 2 and st["faults"] == 10
    dying = fake_server(fail_after=2)
    assert [_embed(dying, "a").status_code for _ in range(4)] == [200, 200, 500, 500]


def test_delay_and_api_key(fake_server):
    srv = fake_server(delay_ms=200, api_key="sekret")
    with pytest.raises(httpx.TimeoutException):
        httpx.post(srv.url, json={"input": "a"}, timeout=0.05)
    assert _embed(srv, "a").status_code == 401
    r = httpx.post(srv.url, json={"input": "a"}, headers={"Authorization": "Bearer sekret"})
    assert r.status_code == 200
    assert srv.stats()["last_authorization"] == "Bearer sekret"


def test_in_process_server_and_record():
    from fakeserver import start_server

    url, shutdown = start_server(dim=16, record=True)
    try:
        r = httpx.post(url + "/v1/embeddings", json={"input": ["p", "q"]})
        assert r.status_code == 200
        assert httpx.get(url + "/inputs").json() == {"inputs": ["p", "q"], "fields": [{}, {}]}
    finally:
        shutdown()


def test_harness_env_isolated(tmp_path):
    import os

    assert "FOLIO_ENDPOINT" not in os.environ and "FOLIO_API_KEY" not in os.environ
    assert os.environ["HOME"] != os.path.expanduser("~root")
    assert os.environ["XDG_CONFIG_HOME"].startswith(os.environ["HOME"])


def test_corpus_fixture_and_write_tree(corpus, corpus_copy, write_tree, tmp_path):
    root = corpus("rust-book")
    assert (root / "PROVENANCE.txt").is_file() and (root / "src").is_dir()
    assert len(first_n_files(root, 5)) == 5
    copy = corpus_copy("rust-book")
    assert copy != root and (copy / "src" / "SUMMARY.md").is_file()
    write_tree(tmp_path / "t", {"a/b.md": "# A\r\nx\n", "c.md": b"\xff"})
    assert (tmp_path / "t" / "a" / "b.md").read_bytes() == b"# A\r\nx\n"


def test_llama_answers_like_the_fake(llama, fake_server):
    """Same response shape and the same too-large error text as the real server."""
    status, body = llama.embed(["hello world"])
    assert status == 200 and len(body["data"][0]["embedding"]) == 384
    fake = _embed(fake_server(), ["hello world"]).json()
    assert set(body) >= {"data", "model", "object", "usage"} and set(fake) >= set(body) - {"id"}
    status, err = llama.embed(["word " * 600])
    assert status == 500 and "is too large to process" in err["error"]["message"]


def test_poisoned_input_fails_only_requests_that_hold_it(fake_server):
    srv = fake_server(dim=16)
    srv.control(fail_input_containing="POISON")
    assert _embed(srv, ["fine", "a POISON pill"]).status_code == 500
    assert _embed(srv, ["fine", "also fine"]).status_code == 200
    srv.control(fail_input_fault="nan")
    v = _vecs(_embed(srv, ["fine", "a POISON pill"]))
    assert np.isfinite(v[0]).all() and np.isnan(v[1]).any()
    srv.control(fail_input_fault="zero")
    v = _vecs(_embed(srv, ["fine", "a POISON pill"]))
    assert np.linalg.norm(v[0]) > 0.99 and not v[1].any()
    with pytest.raises(RuntimeError):
        srv.control(fail_input_fault="bogus")
    srv.control(fail_input_containing=None)
    assert _embed(srv, ["a POISON pill"]).status_code == 200


def test_loading_answers_every_route_as_llama_server_does_while_it_loads(fake_server):
    import httpx

    srv = fake_server(dim=32)
    srv.control(loading_s=30)
    for r in (_embed(srv, "a"), httpx.get(srv.base + "/health"), httpx.get(srv.base + "/v1/models")):
        assert r.status_code == 503 and r.json()["error"]["message"] == "Loading model"
    srv.control(loading_s=0)
    assert _embed(srv, "a").status_code == 200 and httpx.get(srv.base + "/health").status_code == 200
