"""The embeddings client against the failures a real server will not produce on demand (respx)."""

from __future__ import annotations

import base64

import httpx
import numpy as np
import pytest
import respx

from folio.embed import Client, EndpointError

URL = "http://embed.test/v1/embeddings"  # off the loopback: through httpx, which respx mocks


def ok(vectors, *, b64=False):
    data = []
    for i, v in enumerate(vectors):
        emb = base64.b64encode(np.asarray(v, dtype="<f4").tobytes()).decode() if b64 else list(map(float, v))
        data.append({"object": "embedding", "index": i, "embedding": emb})
    return httpx.Response(200, json={"object": "list", "data": data, "model": "m"})


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch):
    monkeypatch.setattr("folio.embed.time.sleep", lambda s: None)


@respx.mock
def test_vectors_are_normalised_and_base64_is_used_when_answered():
    route = respx.post(URL).mock(return_value=ok([[3, 4], [0, 2]], b64=True))
    c = Client(URL, "m")
    m = c.embed(["a", "b"])
    assert np.allclose(m, [[0.6, 0.8], [0, 1]])
    assert route.calls[0].request.content.count(b'"encoding_format":"base64"') == 1
    assert c.transport.base64 is True


@respx.mock
def test_float_answers_are_accepted_and_remembered():
    respx.post(URL).mock(return_value=ok([[1, 0]]))
    c = Client(URL, "m")
    c.embed(["a"])
    assert c.transport.base64 is False


@respx.mock
def test_out_of_order_indexes_are_put_back_in_order():
    resp = {"data": [{"index": 1, "embedding": [0.0, 1.0]}, {"index": 0, "embedding": [1.0, 0.0]}]}
    respx.post(URL).mock(return_value=httpx.Response(200, json=resp))
    m = Client(URL, "m").embed(["first", "second"])
    assert np.allclose(m, [[1, 0], [0, 1]])


@respx.mock
def test_llama_batch_refusal_is_parsed_into_tokens_and_limit():
    body = {"error": {"code": 500, "message": "input (514 tokens) is too large to process. increase the physical "
                      "batch size (current batch size: 512)", "type": "server_error"}}
    respx.post(URL).mock(return_value=httpx.Response(500, json=body))
    with pytest.raises(EndpointError) as e:
        Client(URL, "m").embed(["x" * 3000], labels=["docs/a.md:3-40"])
    assert e.value.kind == "too_large" and (e.value.tokens, e.value.limit) == (514, 512)
    assert "docs/a.md:3-40" in str(e.value) and "current batch size: 512" in str(e.value)


@respx.mock
def test_503_loading_then_success_is_retried():
    route = respx.post(URL).mock(side_effect=[
        httpx.Response(503, json={"error": {"message": "Loading model", "type": "unavailable_error"}}),
        ok([[1, 0]])])
    respx.get(URL.rsplit("/v1/", 1)[0] + "/health").mock(return_value=httpx.Response(200, json={"status": "ok"}))
    assert Client(URL, "m").embed(["a"]).shape == (1, 2)
    assert route.call_count == 2


@respx.mock
def test_429_then_success_is_retried():
    route = respx.post(URL).mock(side_effect=[httpx.Response(429, headers={"retry-after": "1"}), ok([[1, 0]])])
    assert Client(URL, "m").embed(["a"]).shape == (1, 2)
    assert route.call_count == 2


@respx.mock
def test_429_storm_ends_in_a_sentence():
    respx.post(URL).mock(return_value=httpx.Response(429, json={"error": {"message": "slow down"}}))
    with pytest.raises(EndpointError) as e:
        Client(URL, "m").embed(["a"])
    assert "slow down" in str(e.value)


@respx.mock
def test_connection_refused_says_folio_runs_no_model():
    respx.post(URL).mock(side_effect=httpx.ConnectError("[Errno 111] Connection refused"))
    with pytest.raises(EndpointError) as e:
        Client(URL, "m").embed(["a"])
    assert e.value.kind == "unreachable"
    assert "folio runs no model itself" in str(e.value) and "folio config set endpoint" in str(e.value)


@respx.mock
def test_wrong_dimension_against_the_index_names_the_fix():
    respx.post(URL).mock(return_value=ok([[1, 0, 0]]))
    with pytest.raises(EndpointError) as e:
        Client(URL, "m", dim=2).embed(["a"])
    assert "3-dimensional" in str(e.value) and "2-dimensional" in str(e.value)


@respx.mock
def test_wrong_count_nan_and_zero_vectors_are_refused():
    respx.post(URL).mock(return_value=ok([[1, 0]]))
    with pytest.raises(EndpointError, match="1 vectors for 2 inputs"):
        Client(URL, "m").embed(["a", "b"])
    respx.post(URL).mock(return_value=httpx.Response(200, json={"data": [{"index": 0, "embedding": [1.0, "NaN"]}]}))
    with pytest.raises(EndpointError):
        Client(URL, "m").embed(["a"])
    respx.post(URL).mock(return_value=ok([[np.nan, 1]], b64=True))
    with pytest.raises(EndpointError, match="NaN"):
        Client(URL, "m").embed(["a"])
    respx.post(URL).mock(return_value=ok([[0, 0]]))
    with pytest.raises(EndpointError, match="pooling"):
        Client(URL, "m").embed(["a"])


@respx.mock
def test_non_json_body_is_one_sentence():
    respx.post(URL).mock(return_value=httpx.Response(200, text="upstream said no"))
    with pytest.raises(EndpointError, match="not JSON"):
        Client(URL, "m").embed(["a"])


@respx.mock
def test_an_html_page_is_named_as_one_but_json_labelled_html_is_read():
    page = "<!DOCTYPE html><html><head><title>Sign in &amp; continue</title></head><body>x</body></html>"
    respx.post(URL).mock(return_value=httpx.Response(200, text=page))
    with pytest.raises(EndpointError, match=r'answered HTTP 200 with an HTML page \("Sign in & continue"\): it is not'):
        Client(URL, "m").embed(["a"])
    body = ok([[1.0, 0.0]])
    respx.post(URL).mock(return_value=httpx.Response(200, content=body.content,
                                                     headers={"Content-Type": "text/html; charset=utf-8"}))
    assert Client(URL, "m").embed(["a"]).shape == (1, 2)


@respx.mock
def test_pooling_none_names_the_flag():
    respx.post(URL).mock(return_value=httpx.Response(400, json={"error": {
        "code": 400, "message": "Pooling type 'none' is not OAI compatible. Please use a different pooling type",
        "type": "invalid_request_error"}}))
    with pytest.raises(EndpointError, match="--pooling none"):
        Client(URL, "m").embed(["a"])


@respx.mock
def test_bearer_token_is_sent_but_never_in_errors():
    route = respx.post(URL).mock(return_value=httpx.Response(401, json={"error": {"message": "bad key"}}))
    with pytest.raises(EndpointError) as e:
        Client(URL, "m", api_key="sk-secret-123").embed(["a"])
    assert route.calls[0].request.headers["authorization"] == "Bearer sk-secret-123"
    assert "sk-secret-123" not in str(e.value)


@pytest.mark.parametrize("where", ["client", "call"])
def test_a_deadline_set_by_the_caller_ends_the_request_and_its_retries(where):
    """The mechanism a query's own short deadline uses (issue 29): whatever `timeout` allows, a request
    to a server that takes longer ends by the deadline, on the client or on one call."""
    import time

    from helpers import FakeServer

    from folio.embed import Failure

    srv = FakeServer(dim=8, delay_ms=4000)  # slower than the deadline, and its /health answers: "slow"
    try:
        t = time.monotonic()
        c = Client(srv.url, "m", timeout=30, deadline=t + 1.0 if where == "client" else None)
        with pytest.raises(EndpointError) as e:
            c.embed(["a question"], deadline=t + 1.0 if where == "call" else None)
        took = time.monotonic() - t
        assert e.value.kind == Failure.SLOW and "the time it was given" in str(e.value), e.value
        assert 0.9 < took < 2.5, took
    finally:
        srv.stop()


@respx.mock
@pytest.mark.parametrize("path", ["/embeddings", "/embedding"])
def test_llama_server_s_own_embeddings_path_names_the_openai_url(path):
    """llama-server b11434 answers POST /embeddings (and /embedding) 200 with its own shape, a list of
    {index, embedding: [[...]]}: it was 'an unusable answer: no `data` list in the response'."""
    body = [{"index": 0, "embedding": [[0.1, 0.2, 0.3]]}]
    respx.post("http://embed.test" + path).mock(return_value=httpx.Response(200, json=body))
    with pytest.raises(EndpointError) as e:
        Client("http://embed.test" + path, "m").embed(["a"])
    assert str(e.value).endswith("(llama-server's own /embeddings answers so): use http://embed.test/v1/embeddings")


@respx.mock
@pytest.mark.parametrize("endpoint", ["http://embed.test", "http://embed.test/v1", "http://embed.test/v1/embedding",
                                      "http://embed.test/v1/embeddings/"])
def test_a_404_on_a_wrong_path_names_the_url_meant(endpoint):
    respx.post(endpoint).mock(return_value=httpx.Response(404, text="File Not Found"))
    with pytest.raises(EndpointError) as e:
        Client(endpoint, "m").embed(["a"])
    assert str(e.value).endswith("the endpoint URL should end in /v1/embeddings: use http://embed.test/v1/embeddings")


@respx.mock
def test_llama_server_without_embeddings_says_to_restart_it_with_the_flag():
    """b11434 without --embeddings: HTTP 501. It read 'the server refused an input of 1 characters'."""
    body = {"error": {"code": 501, "message": "This server does not support embeddings. Start it with "
                      "`--embeddings`", "type": "not_supported_error"}}
    respx.post(URL).mock(return_value=httpx.Response(501, json=body))
    with pytest.raises(EndpointError) as e:
        Client(URL, "m").embed(["a"])
    assert str(e.value) == (f"the server at {URL} does not serve embeddings (HTTP 501: \"This server does not support "
                            f"embeddings. Start it with `--embeddings`\"): restart llama-server with --embeddings")
