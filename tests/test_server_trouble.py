"""What a user sees when the embeddings server changes or misbehaves under an index: a model
swapped behind the same URL, requests an earlier killed run left queued, redirects, a server that
died, a transient 500 — each named for what it is, each with a way out."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import time

import numpy as np
import pytest
from helpers import folio_command, free_port
from helpers_index import backdate

DOCS = {
    "finance/revenue.md": "# Revenue\n\nOverview of money.\n\n## Recognition\n\nIncome is booked at delivery.\n",
    "ops/runbook.md": "# Runbook\n\n## Restart\n\nBegin with a drain.\n\n## Delete caches\n\nErase the cache.\n",
    "notes/car.md": "# Cars\n\nAn automobile is large.\n",
}
SECTIONS = 6


def make_index(tmp_path, write_tree, run_folio, srv):
    root = write_tree(tmp_path / "corpus", DOCS)
    backdate(root)
    r = run_folio("index", "--endpoint", srv.url, "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["embedded"] == SECTIONS
    return root


# -- a model swapped behind the same URL (issue 15.3) ----------------------------------------------


def test_a_no_op_index_re_embeds_when_the_server_restarted_on_another_model(tmp_path, write_tree, fake_server,
                                                                            run_folio):
    srv = fake_server(dim=32)
    root = make_index(tmp_path, write_tree, run_folio, srv)
    srv.restart(space="b")  # same port, same model name, another model
    q = run_folio("query", "erase the cache", cwd=root)  # answered lexically, saying why and the fix
    assert q.returncode == 0 and "another vector space" in q.stderr and "folio index" in q.stderr
    # no file changed: the run still asks the server for the fingerprint, sees the new space, re-embeds
    r = run_folio("index", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    assert "another vector space" in r.stderr and "re-embedding every section" in r.stderr
    rep = json.loads(r.stdout)
    assert rep["embedded"] == SECTIONS and rep["new"] == rep["changed"] == rep["deleted"] == 0
    q = run_folio("query", "erase the cache", "--json", cwd=root)
    assert q.returncode == 0, q.stderr
    assert json.loads(q.stdout)["results"][0]["path"] == "ops/runbook.md"
    # and the run after that is a no-op again: one probe, nothing embedded, no notice
    srv.control(reset_stats=True)
    r = run_folio("index", "--json", cwd=root)
    assert r.returncode == 0 and json.loads(r.stdout)["embedded"] == 0
    assert "vector space" not in r.stderr
    assert srv.stats()["inputs"] == 1


class _Local:
    """A real HTTP server on 127.0.0.1 running one handler class in a thread: `.url`, `.stop()`."""

    def serve(self, handler) -> None:
        import threading
        from http.server import ThreadingHTTPServer

        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}/v1/embeddings"
        threading.Thread(target=self.srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def stop(self):
        self.srv.shutdown()
        self.srv.server_close()


class _Framed(_Local):
    """A real embeddings server on 127.0.0.1 whose answers carry no Content-Length: chunked, or ended by
    closing the connection (both are HTTP/1.1; a proxy in front of a server may answer either way).
    Vectors are a function of the text and of `space`."""

    def __init__(self, framing: str):
        import hashlib
        from http.server import BaseHTTPRequestHandler

        outer = self
        self.space, self.requests = "a", 0

        def vector(text: str) -> list[float]:
            d = hashlib.sha256(f"{outer.space}|{text}".encode()).digest()
            v = [b - 127.5 for b in d[:16]]
            n = sum(x * x for x in v) ** 0.5
            return [x / n for x in v]

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                outer.requests += 1
                inputs = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))["input"]
                body = json.dumps({"object": "list", "model": "framed", "data": [
                    {"object": "embedding", "index": i, "embedding": vector(t)} for i, t in enumerate(inputs)]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                if framing == "chunked":
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for k in range(0, len(body), 97):  # many small chunks
                        part = body[k:k + 97]
                        self.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
                    self.wfile.write(b"0\r\n\r\n")
                else:
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.wfile.write(body)
                    self.close_connection = True

        self.serve(H)


@pytest.mark.parametrize("framing", ["chunked", "close"])
def test_a_no_op_index_checks_the_space_whatever_the_answers_framing(tmp_path, write_tree, run_folio, framing):
    srv = _Framed(framing)
    try:
        root = make_index(tmp_path, write_tree, run_folio, srv)
        asked = srv.requests
        r = run_folio("index", "--json", cwd=root)
        assert r.returncode == 0 and json.loads(r.stdout)["embedded"] == 0, r.stderr
        assert r.stderr == "" and srv.requests == asked + 1  # the probe was read, and it matched
        srv.space = "b"  # another model behind the same URL
        r = run_folio("index", "--json", cwd=root)
        assert r.returncode == 0, r.stderr
        assert "another vector space" in r.stderr and json.loads(r.stdout)["embedded"] == SECTIONS
    finally:
        srv.stop()


def test_a_no_op_index_without_a_server_still_works(tmp_path, write_tree, fake_server, run_folio):
    srv = fake_server(dim=32)
    root = make_index(tmp_path, write_tree, run_folio, srv)
    srv.stop()
    r = run_folio("index", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["embedded"] == 0
    assert r.stderr.strip() == "", r.stderr  # nothing to check against, nothing to say


def test_a_no_op_index_says_when_the_server_answers_the_probe_with_an_error(tmp_path, write_tree, fake_server,
                                                                           run_folio):
    srv = fake_server(dim=32)
    root = make_index(tmp_path, write_tree, run_folio, srv)
    srv.control(fail="500")
    r = run_folio("index", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    assert "could not check" in r.stderr and "HTTP 500" in r.stderr
    assert json.loads(r.stdout)["embedded"] == 0


def one_sentence(r) -> str:
    """The run failed with exactly one `folio: ...` line and no traceback."""
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("folio: ")]
    assert len(errors) == 1, r.stderr
    return errors[0]


def edit(root, name="notes/car.md", text="# Cars\n\nAn automobile is large.\n\n## Wheels\n\nFour of them.\n"):
    (root / name).write_text(text)


# -- a transient HTTP 500 (issue 15.9) -------------------------------------------------------------


def test_a_transient_500_on_the_first_request_is_retried(tmp_path, write_tree, fake_server, run_folio):
    srv = fake_server(dim=32)
    root = make_index(tmp_path, write_tree, run_folio, srv)
    edit(root)
    srv.control(fail="500", times=2, reset_stats=True)  # the run's first request fails, and its first retry
    r = run_folio("index", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["embedded"] == 1
    assert srv.stats()["faults"] == 2
    # what the run learned from the server is what a clean run learns: the 500 was not taken for a limit
    assert "divided" not in r.stderr and "takes at most" not in r.stderr


def test_a_500_that_persists_still_stops_the_run_with_the_servers_words(tmp_path, write_tree, fake_server,
                                                                        run_folio):
    srv = fake_server(dim=32)
    root = make_index(tmp_path, write_tree, run_folio, srv)
    edit(root)
    srv.control(fail="500", reset_stats=True)
    line = one_sentence(run_folio("index", cwd=root))
    assert 'HTTP 500' in line and "injected failure" in line and "waits for vectors" in line
    assert srv.stats()["requests"] <= 6  # a bounded number of tries, then a stop
    # a 5xx is the server failing, not a refusal of the text; the input was folio's probe, named so
    assert line.startswith('folio: the server failed on folio\'s fixed probe sentence (HTTP 500: "injected failure")'), line
    assert "refused" not in line and "characters" not in line, line


# -- a redirect (issue 15.9) ------------------------------------------------------------------------


class _Redirect(_Local):
    """A real HTTP server on 127.0.0.1 answering every request with `code` and Location: `to`."""

    def __init__(self, to: str, code: int = 307):
        from http.server import BaseHTTPRequestHandler

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _answer(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(code)
                self.send_header("Location", to)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_POST = do_GET = _answer

        self.serve(H)


def test_a_redirect_is_called_a_redirect_with_where_to(tmp_path, write_tree, fake_server, run_folio):
    srv = fake_server(dim=32)
    hop = _Redirect(srv.url)
    try:
        root = write_tree(tmp_path / "c", DOCS)
        r = run_folio("index", "--endpoint", hop.url, cwd=root)
        line = one_sentence(r)
        assert "redirect" in line and "HTTP 307" in line and srv.url in line, line
        assert "refused an input" not in line and "characters" not in line
        assert f"--endpoint {srv.url}" in line or f"endpoint {srv.url}" in line  # the fix: the final URL
        q = run_folio("index", "--endpoint", srv.url, "--json", cwd=root)
        assert q.returncode == 0, q.stderr  # the fix the sentence gives works
    finally:
        hop.stop()


# -- a server that died mid-run (issue 15.9) --------------------------------------------------------


def test_a_server_killed_mid_run_is_called_gone_not_hung(tmp_path, write_tree, fake_server, run_folio):
    srv = fake_server(dim=32, delay_ms=300)
    files = {f"n{i:02}.md": f"# Note {i}\n\nLighthouse {i}.\n" for i in range(40)}
    root = write_tree(tmp_path / "c", {**files, "folio.yaml": "batch_size: 2\n"})  # many short requests
    proc = subprocess.Popen([*folio_command(), "index", "--endpoint", srv.url], cwd=root, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while srv.stats()["requests"] < 3:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    srv.kill()  # mid-run, a request in flight
    out, err = proc.communicate(timeout=120)
    line = one_sentence(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    assert "hung" not in line, line
    assert "connection refused" in line and "stopped or crashed" in line, line
    assert "folio index` again" in line


def test_a_server_stopped_while_folio_waits_is_called_stopped_not_hung(tmp_path, write_tree, fake_server,
                                                                       run_folio):
    # llama-server on SIGTERM closes its listening socket while a request it took stays unanswered:
    # folio's wait runs out, and /health is refused — a server that stopped, not one that hangs.
    srv = fake_server(dim=32)
    root = make_index(tmp_path, write_tree, run_folio, srv)
    edit(root)
    srv.control(fail="shutdown", hang_s=30)
    r = run_folio("index", cwd=root, env={"FOLIO_TIMEOUT": "1"}, timeout=60)
    line = one_sentence(r)
    assert "hung" not in line, line
    assert "stopped listening" in line and "connection refused" in line and "start it again" in line, line
    assert "waits for vectors" in line


NO_PROXIES = {v: None for v in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY",
                                "all_proxy", "NO_PROXY", "no_proxy")}


@pytest.mark.skipif(importlib.util.find_spec("socksio") is not None, reason="socksio installed: httpx speaks SOCKS")
def test_a_socks_proxy_without_socksio_is_one_sentence_and_no_proxy_still_reaches_the_server(
        tmp_path, write_tree, run_folio, fake_server):
    """A SOCKS proxy in the environment (ALL_PROXY, as `ssh -D` setups leave it) and no socksio: httpx
    refuses to build a client at all. Where NO_PROXY leaves the server out, folio reaches it directly;
    where the requests must go through the proxy, every command says so in one sentence with the
    fixes, a query answers lexically, and nothing is a traceback."""
    srv = fake_server(dim=16)
    root = make_index(tmp_path, write_tree, run_folio, srv)
    socks = {**NO_PROXIES, "ALL_PROXY": "socks5://127.0.0.1:9"}

    bypass = {**socks, "NO_PROXY": "127.0.0.1"}
    r = run_folio("query", "drain before restart", "--json", cwd=root, env=bypass)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    got = json.loads(r.stdout)
    assert got["mode"] == "hybrid" and not got.get("notices"), got
    (root / "notes" / "car.md").write_text("# Cars\n\nAn automobile is large and red.\n")
    r = run_folio("index", "--json", cwd=root, env=bypass)
    assert r.returncode == 0 and json.loads(r.stdout)["embedded"] == 1, r.stderr

    (root / "notes" / "car.md").write_text("# Cars\n\nAn automobile is large and blue.\n")
    for args in (("index",), ("doctor",)):
        r = run_folio(*args, cwd=root, env=socks)
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("folio: ALL_PROXY=socks5://127.0.0.1:9 "), r.stderr
        assert "socksio" in lines[0] and "NO_PROXY=127.0.0.1" in lines[0], r.stderr
    r = run_folio("query", "drain before restart", "--json", cwd=root, env=socks)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    got = json.loads(r.stdout)
    assert got["mode"] == "lexical" and got["results"][0]["path"] == "ops/runbook.md", got
    assert any("socksio" in n for n in got["notices"]), got["notices"]


@pytest.mark.parametrize(("var", "proxy", "says"), [
    ("ALL_PROXY", "socks4://127.0.0.1:9", "folio speaks no socks4:// proxy"),
    ("HTTP_PROXY", "ftp://127.0.0.1:9", "folio speaks no ftp:// proxy"),
    ("HTTP_PROXY", "http://127.0.0.1:99999", "out of range"),
    ("http_proxy", "http://127.0.0.1:port", "could not be cast to integer"),
    ("HTTP_PROXY", "http://[::1", "Invalid IPv6 URL"),
])
def test_a_malformed_proxy_variable_is_one_sentence_naming_it(tmp_path, write_tree, run_folio, fake_server,
                                                              var, proxy, says):
    """A proxy variable httpx cannot take (a scheme it does not speak, a bad port or host): a query ranks
    lexically with one notice naming it, `index` and `doctor` say one sentence naming it; a variable
    the server's requests do not use (NO_PROXY, another scheme's) changes nothing."""
    srv = fake_server(dim=16)
    root = make_index(tmp_path, write_tree, run_folio, srv)
    env = {**NO_PROXIES, var: proxy}
    r = run_folio("query", "drain before restart", "--json", cwd=root, env=env)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    got = json.loads(r.stdout)
    assert got["mode"] == "lexical" and got["results"][0]["path"] == "ops/runbook.md", got
    [notice] = [n for n in got["notices"] if f"{var}={proxy}" in n]
    assert says in notice and "NO_PROXY=127.0.0.1" in notice, notice
    (root / "notes" / "car.md").write_text("# Cars\n\nAn automobile is large and blue.\n")
    for args in (("index",), ("doctor",)):
        r = run_folio(*args, cwd=root, env=env)
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
        named = [ln for ln in (r.stderr + r.stdout).splitlines() if f"{var}={proxy}" in ln]
        assert named and says in named[0] and f"fix {var}" in named[0], (r.stdout, r.stderr)
        if args == ("index",):
            assert r.stderr.startswith("folio: ") and len(r.stderr.strip().splitlines()) == 1, r.stderr
    # Where the server's requests need no proxy, the malformed variable is not in the way.
    for other in ({**env, "NO_PROXY": "127.0.0.1"}, {**NO_PROXIES, "HTTPS_PROXY": proxy}):
        r = run_folio("query", "drain before restart", "--json", cwd=root, env=other)
        assert r.returncode == 0 and json.loads(r.stdout)["mode"] == "hybrid", (r.stdout, r.stderr)


def test_a_dead_proxy_is_named_not_the_server(tmp_path, write_tree, run_folio, fake_server):
    """HTTP_PROXY names a port nobody listens on: the sentence says the proxy does not answer, names
    the variable and NO_PROXY, and does not tell the user to start an embeddings server that runs."""
    srv = fake_server(dim=16)
    root = make_index(tmp_path, write_tree, run_folio, srv)
    proxy = f"http://127.0.0.1:{free_port()}"
    env = {**NO_PROXIES, "HTTP_PROXY": proxy}
    (root / "notes" / "car.md").write_text("# Cars\n\nAn automobile is large and blue.\n")
    r = run_folio("index", cwd=root, env=env)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    [line] = [ln for ln in r.stderr.splitlines() if ln.startswith("folio: ")]
    assert f"the proxy HTTP_PROXY={proxy}" in line and "does not answer" in line, line
    assert "NO_PROXY=127.0.0.1" in line and "no embeddings server answers" not in line, line
    r = run_folio("doctor", cwd=root, env=env)
    assert r.returncode == 1 and f"the proxy HTTP_PROXY={proxy}" in r.stdout + r.stderr, (r.stdout, r.stderr)
    assert "no embeddings server answers" not in r.stdout + r.stderr
    r = run_folio("query", "drain before restart", "--json", cwd=root, env=env)
    got = json.loads(r.stdout)
    assert r.returncode == 0 and got["mode"] == "lexical", r.stderr
    assert any(f"the proxy HTTP_PROXY={proxy}" in n and "NO_PROXY" in n for n in got["notices"]), got["notices"]


def test_a_dead_server_says_it_will_rank_by_meaning_again_not_what_nothing_configured(tmp_path, write_tree,
                                                                                    fake_server, run_folio):
    """Indexed with --endpoint and no configuration: the fallback used to end "the config now names
    http://127.0.0.1:8080/v1/embeddings (default)", a fix nobody configured."""
    srv = fake_server()
    root = make_index(tmp_path, write_tree, run_folio, srv)
    srv.stop()
    r = run_folio("query", "when is income booked", cwd=root, env={"FOLIO_ENDPOINT": None})
    assert r.returncode == 0, r.stderr
    said = [line for line in r.stderr.splitlines() if "ranking lexically" in line]
    assert len(said) == 1 and said[0].endswith("until it answers again"), r.stderr
    assert "(default)" not in r.stderr
    assert "Recognition" in r.stdout


def test_a_dead_recorded_endpoint_names_the_fix_that_moves_the_index_not_a_setting(tmp_path, write_tree,
                                                                                   fake_server, run_folio):
    """A query and `folio similar` embed through the endpoint the index recorded, whatever the settings
    name. With that server gone, `folio similar -` said "point folio at one with `folio config set
    endpoint URL` or FOLIO_ENDPOINT", and the query's notice ended "the config now names URL (env
    FOLIO_ENDPOINT)": an agent that set FOLIO_ENDPOINT to a live server got the same error again. Now
    both name what moves the index (`folio index`), and doing it works."""
    srv = fake_server()
    root = make_index(tmp_path, write_tree, run_folio, srv)
    srv.stop()
    other = fake_server()
    env = {"FOLIO_ENDPOINT": other.url}
    r = run_folio("similar", "-", cwd=root, env=env, input="# Draft\n\nIncome is booked at delivery.\n")
    assert r.returncode == 1, r.stderr
    assert "FOLIO_ENDPOINT" not in r.stderr and "config set endpoint" not in r.stderr, r.stderr
    assert "`folio index --endpoint URL`" in r.stderr, r.stderr
    r = run_folio("query", "when is income booked", "--json", cwd=root, env=env)
    assert r.returncode == 0, r.stderr
    said = json.loads(r.stdout)["notices"]
    assert any(f"the config now names {other.url} (env FOLIO_ENDPOINT): run `folio index` to move the index to it"
               in n for n in said), said
    r = run_folio("index", cwd=root, env=env)  # what the notice said to run
    assert r.returncode == 0, r.stderr
    r = run_folio("query", "when is income booked", "--json", cwd=root, env=env)
    assert json.loads(r.stdout)["mode"] == "hybrid", r.stdout
    r = run_folio("similar", "-", cwd=root, env=env, input="# Draft\n\nIncome is booked at delivery.\n")
    assert r.returncode == 0, r.stderr


def test_a_server_that_refused_says_run_index_again_once_that_is_fixed(tmp_path, write_tree, fake_server, run_folio):
    """A server that answered with a refusal (here a key it wants; likewise no --embeddings, a wrong path,
    --pooling none) was told to be waited for: "run `folio index` again once the server answers"."""
    srv = fake_server(api_key="k3y-for-test")
    root = write_tree(tmp_path / "corpus", DOCS)
    r = run_folio("index", "--endpoint", srv.url, cwd=root)
    assert r.returncode == 1
    assert "it asks for an API key and none is configured" in r.stderr, r.stderr
    # the endpoint came from the flag, which the index records only with its first vectors: the way back names it
    assert r.stderr.rstrip().endswith(f"wait for vectors: run `folio index --endpoint {srv.url}` again once that is "
                                      f"fixed (a flag is not remembered: `folio config set endpoint {srv.url}` keeps "
                                      f"it)"), r.stderr


# -- a server still loading its model (llama-server answers 503 "Loading model" everywhere) ---------


def test_an_index_waits_for_a_server_loading_its_model_and_takes_the_preset_of_the_model_it_loads(
        tmp_path, write_tree, fake_server, run_folio):
    """`llama-server -m model.gguf & folio index`: the model id the roles follow was read while the
    server still loaded (503), so a nomic model was embedded without its `search_document: ` prefix,
    and a model that loads for longer than the busy retries (~20 s) failed the run."""
    srv = fake_server(record=True, model_id="/models/nomic-embed-text-v1.5.Q8_0.gguf")
    root = write_tree(tmp_path / "corpus", DOCS)
    srv.control(loading_s=3, reset_stats=True, record=True)
    r = run_folio("index", "--endpoint", srv.url, "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["embedded"] == SECTIONS
    assert f"the embeddings server at {srv.url} is loading its model (its /health answers 503 \"Loading model\"): " \
           f"folio waits for it ..." in r.stderr
    assert srv.inputs() and all(t.startswith("search_document: ") for t in srv.inputs())
    assert srv.stats()["status"].get("503", 0) <= 1  # waited on /health, not hammering its embeddings


def test_an_index_waits_for_a_model_that_loads_longer_than_the_busy_retries(tmp_path, write_tree, fake_server,
                                                                            run_folio):
    srv = fake_server()
    root = write_tree(tmp_path / "corpus", DOCS)
    (root / "folio.yaml").write_text("query_prefix: ''\ndocument_prefix: ''\n")  # roles set: no /v1/models asked
    srv.control(loading_s=25, reset_stats=True)
    r = run_folio("index", "--endpoint", srv.url, "--json", cwd=root, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["embedded"] == SECTIONS
    assert "was loading its model: folio waited 2" in r.stdout + r.stderr


def test_an_index_indexes_the_words_first_while_its_server_loads_its_model(tmp_path, write_tree, fake_server,
                                                                          run_folio):
    """`llama-server -m big.gguf & folio index` on a new corpus: folio waited for the model (a minute or
    more for a big one) with nothing written, so a query meanwhile found no index at all. Now every
    file's words are indexed first: a query ranks them at once, saying a run waits for the model, and
    the run embeds the sections once it has loaded, with one report for all it did."""
    srv = fake_server()
    root = write_tree(tmp_path / "corpus", DOCS)
    (root / "folio.yaml").write_text("query_prefix: ''\ndocument_prefix: ''\n")  # roles set: no /v1/models asked
    srv.control(loading_s=10, reset_stats=True)
    loads_until = time.monotonic() + 10
    proc = subprocess.Popen([*folio_command(), "index", "--endpoint", srv.url, "--json"], cwd=root,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        answered, said = None, []
        while time.monotonic() < loads_until - 3:  # (the run's note says it waits once its wait begins)
            q = run_folio("query", "erase the cache", "--json", cwd=root)
            if q.returncode == 0 and json.loads(q.stdout)["results"]:
                answered = json.loads(q.stdout)
                said = [n for n in answered["notices"] if "holds no vectors yet" in n]
                if said and "waits for the embeddings server to load its model" in said[0]:
                    break
            time.sleep(0.3)
        assert answered is not None, "no query answered while the server loaded its model"
        assert said and "is under way" in said[0], answered["notices"]
        assert "waits for the embeddings server to load its model" in said[0], said
        assert proc.poll() is None, proc.communicate()  # the run still waits for the model
        assert answered["mode"] == "lexical" and answered["results"][0]["path"] == "ops/runbook.md"
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    rep = json.loads(out)
    assert rep["embedded"] == SECTIONS and rep["new"] == len(DOCS) and rep["waiting"] == 0, rep
    assert err.count("is loading its model (its /health answers 503") == 1, err
    assert f"the words of {SECTIONS} sections are indexed (queries rank them lexically now)" in err, err
    q = run_folio("query", "erase the cache", "--json", cwd=root)
    assert json.loads(q.stdout)["mode"] == "hybrid", q.stdout


def test_a_first_build_learns_the_token_limit_once_its_server_has_loaded_its_model(tmp_path, write_tree, fake_server,
                                                                                    run_folio):
    """The limit probe asked /v1/models while the server still answered 503 "Loading model", took that
    for a server counting no tokens, recorded it, then learned the real limit: every file read again,
    and a first build said `the server now takes 512 tokens an input ..., where the index recorded no
    token limit (the server counts no tokens for folio): every file is divided again`."""
    srv = fake_server(n_ctx=512)
    root = write_tree(tmp_path / "corpus", DOCS)
    (root / "folio.yaml").write_text("query_prefix: ''\ndocument_prefix: ''\n")  # roles set: no /v1/models asked
    srv.control(loading_s=3)
    r = run_folio("index", "--endpoint", srv.url, "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["embedded"] == SECTIONS and rep["tokens"] == 512, rep
    assert "divided again" not in r.stderr and "recorded no token limit" not in r.stderr, r.stderr
    st = json.loads(run_folio("status", "--json", cwd=root).stdout)
    assert (st["tokens"], st["tokens_from"]) == (512, "context"), st


def test_status_says_the_words_are_indexed_while_a_first_build_waits_for_the_model(tmp_path, write_tree, fake_server,
                                                                                    run_folio):
    """`folio status` meanwhile said the run was under way at 0 of 0 files, then `model none: lexical
    plane only (no embeddings server gave it vectors when it was built)`, and --json's `running` held
    counts of 0 and a `loading` key the schema did not name: neither said that the words of every
    section are indexed and the run waits for the model to embed them."""
    from test_json_contract import problems

    srv = fake_server()
    root = write_tree(tmp_path / "corpus", DOCS)
    (root / "folio.yaml").write_text("query_prefix: ''\ndocument_prefix: ''\n")  # roles set: no /v1/models asked
    srv.control(loading_s=60)
    proc = subprocess.Popen([*folio_command(), "index", "--endpoint", srv.url], cwd=root, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline, st = time.monotonic() + 45, {}
        while time.monotonic() < deadline and proc.poll() is None:
            r = run_folio("status", "--json", cwd=root)
            st = json.loads(r.stdout) if r.returncode == 0 else {}
            if st.get("sections") == SECTIONS and (st.get("running") or {}).get("loading"):
                break
            time.sleep(0.2)
        assert proc.poll() is None, proc.communicate()
        assert st.get("sections") == SECTIONS and st["running"].get("loading"), f"status never showed the wait: {st}"
        assert problems("status", st) == []
        assert st["running"]["pid"] == proc.pid and "files" not in st["running"]  # it has not walked the tree yet
        assert (st["embedded"], st["model"]) == (0, None)
        text = run_folio("status", cwd=root).stdout
        assert (f"is under way: the words of {SECTIONS} sections are indexed (queries rank them by their words now), "
                f"and it waits for the embeddings server to load its model to embed them") in text, text
        assert "model     none yet: the run under way records it with its first vectors (once its embeddings " \
               "server has loaded its model)" in text, text
        assert "lexical plane only" not in text and "0 of 0" not in text
        srv.control(loading_s=0)  # loaded: the run embeds what waits
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    st = json.loads(run_folio("status", "--json", cwd=root).stdout)
    assert st["running"] is None and st["embedded"] == SECTIONS and st["model"] == "default"


def test_a_query_does_not_wait_for_a_server_loading_its_model(tmp_path, write_tree, fake_server, run_folio):
    srv = fake_server()
    root = make_index(tmp_path, write_tree, run_folio, srv)
    srv.control(loading_s=60)
    t0 = time.monotonic()
    r = run_folio("query", "income booked at delivery", "--json", cwd=root, env={"FOLIO_QUERY_TIMEOUT": "30"})
    took = time.monotonic() - t0
    d = json.loads(r.stdout)
    assert r.returncode == 0 and d["mode"] == "lexical" and d["results"][0]["path"] == "finance/revenue.md"
    assert any('answered HTTP 503 ("Loading model") to 1 try' in n and "still loading its model" in n
               for n in d["notices"]), d["notices"]
    assert took < 10, took  # the query's whole timeout (30 s here) was spent waiting before


def test_doctor_says_at_once_that_the_server_is_loading_its_model(tmp_path, write_tree, fake_server, run_folio):
    srv = fake_server()
    root = write_tree(tmp_path / "corpus", DOCS)
    srv.control(loading_s=60)
    t0 = time.monotonic()
    r = run_folio("doctor", "--endpoint", srv.url, "--json", cwd=root)
    took = time.monotonic() - t0
    checks = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    assert r.returncode == 1 and checks["reachable"]["status"] == "fail"
    assert "still loading its model: wait until its /health answers 200" in checks["reachable"]["summary"]
    assert checks["pooling"]["summary"] == "the server is not ready (busy, or loading its model)"
    assert took < 10, took  # 9 tries over 20 s before


def test_a_server_restarted_in_another_space_mid_run_leaves_no_vector_of_it_beside_the_older_ones(
        tmp_path, write_tree, fake_server, run_folio):
    """llama-server killed mid-run and started again on its port with another --pooling, between two
    requests: folio reaches it again on a new connection. The run must not go on embedding in the new
    space beside the vectors of the old one (every query would then rank most of the corpus in the
    wrong space): it stops, saying so, keeping only vectors of the space it began in (none of the
    requests it sent while the connection was lost), and the next `folio index` re-embeds every
    section in the new one."""
    from helpers import Forwarder, many_files
    from helpers_index import assert_same_index, read_index

    docs = many_files(30, 8)
    a, b = fake_server(dim=32, space="a", delay_ms=150), fake_server(dim=32, space="b")
    clean_a = write_tree(tmp_path / "clean_a", docs)
    assert run_folio("index", "--endpoint", fake_server(dim=32, space="a").url, cwd=clean_a).returncode == 0
    fwd = Forwarder(a.port)
    try:
        root = write_tree(tmp_path / "c", docs | {"folio.yaml": "batch_size: 8\n"})
        proc = subprocess.Popen([*folio_command(), "index", "--endpoint", fwd.url, "--json"], cwd=root,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 120
            while proc.poll() is None and time.monotonic() < deadline and a.stats()["inputs"] < 80:
                time.sleep(0.02)
            assert proc.poll() is None, "the run ended before a third of its sections were embedded"
            fwd.switch(b.port)  # the restart: every connection closed, the port now reaches space b
            out, err = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
        st, ref = read_index(root), read_index(clean_a)
        kept = [k for k, (_slot, vec) in st.records.items() if vec]  # those committed before the restart
        wrong = [k[:3] for k in kept if not np.allclose(st.vector(k), ref.vector(k), atol=1e-6)]
        assert not wrong, f"{len(wrong)} of {len(kept)} vectors come from the restarted server's space: {wrong[:3]}"
        assert proc.returncode == 1 and "another vector space" in err, (proc.returncode, err)
        r = run_folio("index", "--endpoint", fwd.url, cwd=root, timeout=300)
        assert r.returncode == 0 and "another vector space" in r.stderr, r.stderr
    finally:
        fwd.close()
    clean_b = write_tree(tmp_path / "clean_b", docs)
    assert run_folio("index", "--endpoint", b.url, cwd=clean_b).returncode == 0
    assert_same_index(root, clean_b)
