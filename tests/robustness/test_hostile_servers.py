"""Hostile servers cannot make folio hang or eat the machine (issue 30, section 1 and the server items
of section 3). Each mode of tests/hostileserver.py (a raw socket on 127.0.0.1: endless bodies, a
100 GB Content-Length, a gzip bomb, one byte a second, endless `100 Continue`, stalls, garbage
instead of HTTP, a million headers, a redirect, a web server's HTML pages) meets the real CLI with FOLIO_TIMEOUT=1, under a
1 GiB address-space cap: every run ends within a few timeouts, stays small, prints no traceback,
and says in one sentence which server did what. `folio index` stops (exit 1) with that sentence;
`folio query` answers from the lexical plane with it as its notice (one rule for every way a server
fails a query); a no-op `folio index` says so in a notice. The same limits hold on the httpx path
(a proxy configured) as on folio's own HTTP client. docs/robustness.md has the measured peaks."""

from __future__ import annotations

import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import time

import pytest
from helpers import REPO, folio_command, free_port, write_tree

HOSTILE = REPO / "tests" / "hostileserver.py"
TIMEOUT = 1  # FOLIO_TIMEOUT for the servers that run out the clock (each sends its first bytes at once)
# The others are refused for their size or shape, not their time: they get 5 s, so that reading
# 4 MB on a loaded machine is never what ends them.
CLOCKED = {"trickle-head", "trickle-body", "continue-slow", "stall"}
CAP = 1 << 30  # address space a run may take: without the bounds, an endless answer reaches it
PEAK_MB = 250  # a bounded run stays far below (about 40 MB; an answer read whole reached the cap)
ENDS_S = 6 * TIMEOUT + 10  # generous: the point is that it ends (a no-op or a query takes 1 timeout at most, index 2)
DOCS = {f"d{i}.md": f"# Doc {i}\n\nThe lighthouse keeper trims the wick, part {i}.\n\n## Tea\n\nA kettle {i}.\n"
        for i in range(4)}

# mode -> what the sentence says the server did (the query's first request carries 2 inputs, the index's 1)
SAYS = {
    "chunked": "sent more than",
    "huge-length": "announced an answer of 100 GB",
    "no-length": "sent more than",
    "gzip-bomb": "sent a compressed answer (which folio did not ask for) that expands past",
    "trickle-head": f"bytes of a status line and headers after {TIMEOUT} s",
    "trickle-body": f"bytes of the 1000000 announced after {TIMEOUT} s",
    "continue": "17 interim answers (HTTP 100) and no answer",
    "continue-slow": f"interim answers (HTTP 1xx) and nothing more after {TIMEOUT} s",
    "stall-huge": "announced an answer of 100 GB",
    "stall": f"HTTP 200 and 10 bytes of the 2000 announced after {TIMEOUT} s",
    "garbage-status": "not HTTP (its status line is 'HTTP/1.1 OK then some')",
    "not-http": "not HTTP (it began 'SSH-2.0-OpenSSH_9.6\\r\\n')",
    "headers": "a status line and headers longer than 64 KiB",
    "redirect": "redirects (HTTP 307) to",
    # a web server where the embeddings server should be: which URL, what it is not, what to check
    "html-200": '/v1/embeddings answered HTTP 200 with an HTML page ("Welcome to nginx!"): it is not an '
                "OpenAI-compatible embeddings endpoint",
    "html-404": '/v1/embeddings answered HTTP 404 with an HTML page ("404 Not Found"): it is not an '
                "OpenAI-compatible embeddings endpoint",
}
# A query knows the index's dimension (16): its limit is smaller, and the bomb is refused unread.
QUERY_SAYS = {**SAYS, "gzip-bomb": "announced an answer of 4.2 MB"}


class Hostile:
    def __init__(self, mode: str, port: int = 0):
        self.proc = subprocess.Popen([sys.executable, str(HOSTILE), mode, "--port", str(port)],
                                     stdout=subprocess.PIPE, text=True)
        self.url = self.proc.stdout.readline().strip() + "/v1/embeddings"

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()


@pytest.fixture
def hostile():
    started: list[Hostile] = []

    def start(mode: str, port: int = 0) -> Hostile:
        started.append(Hostile(mode, port))
        return started[-1]

    yield start
    for h in started:
        h.stop()


def capped(*args, cwd, env=None, timeout=TIMEOUT):
    """The CLI under the address-space cap: (CompletedProcess, seconds, peak RSS in MB). The child is
    reaped with wait4, so its own peak is read."""
    import tempfile

    full = {**os.environ, "FOLIO_TIMEOUT": str(timeout), **(env or {})}
    if len(folio_command()) == 3:  # `python -m folio`, as run_folio runs it
        full["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), full.get("PYTHONPATH")]))
    full = {k: v for k, v in full.items() if v is not None}
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        t = time.monotonic()
        p = subprocess.Popen([*folio_command(), *map(str, args)], cwd=cwd, env=full, stdout=fo, stderr=fe,
                             stdin=subprocess.DEVNULL,
                             preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP)))
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - t > ENDS_S + 30:
                p.kill()
                os.wait4(p.pid, 0)
                pytest.fail(f"folio {' '.join(map(str, args))} was still running after {ENDS_S + 30} s")
            time.sleep(0.02)
        secs = time.monotonic() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        fo.seek(0)
        fe.seek(0)
        out, err = fo.read().decode("utf-8", "replace"), fe.read().decode("utf-8", "replace")
    return subprocess.CompletedProcess(p.args, p.returncode, out, err), secs, ru.ru_maxrss / 1024


def bounded(r, secs, peak) -> None:
    assert "Traceback" not in r.stderr and "MemoryError" not in r.stderr, r.stderr[-2000:]
    assert secs < ENDS_S, (secs, r.stderr)
    assert peak < PEAK_MB, (peak, r.stderr)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """An index with vectors built against a good server (its port then free for a hostile one)."""
    from helpers import FakeServer, run_folio

    port = free_port()
    srv = FakeServer(port=port, dim=16)
    root = write_tree(tmp_path_factory.mktemp("built") / "c", DOCS)
    past = time.time() - 10
    for name in DOCS:
        os.utime(root / name, (past, past))
    try:
        r = run_folio("index", "--endpoint", srv.url, cwd=root)
        assert r.returncode == 0, r.stderr
    finally:
        srv.stop()
    return root


def copy_pointing_at(built, tmp_path, url):
    root = tmp_path / "c"
    shutil.copytree(built, root)
    with sqlite3.connect(root / ".folio" / "index.db") as c:
        c.execute("UPDATE meta SET value = ? WHERE key = 'endpoint'", (url,))
    c.close()
    return root


@pytest.mark.parametrize("mode", list(SAYS))
def test_index_against_a_hostile_server_ends_small_with_one_sentence(tmp_path, hostile, mode):
    srv = hostile(mode)
    root = write_tree(tmp_path / "c", DOCS)
    r, secs, peak = capped("index", "--endpoint", srv.url, cwd=root, timeout=TIMEOUT if mode in CLOCKED else 5)
    bounded(r, secs, peak)
    assert r.returncode == 1, r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("folio: ")]
    assert len(errors) == 1, r.stderr
    assert srv.url in errors[0] and SAYS[mode] in errors[0], errors[0]
    assert "no embeddings server answers" not in r.stderr  # something did answer: it says what
    assert "every file is in the lexical plane" in errors[0]  # and the run indexed the words anyway


@pytest.mark.parametrize("mode", list(QUERY_SAYS))
def test_a_query_against_a_hostile_server_answers_lexically_and_says_what_it_did(built, tmp_path, hostile, mode):
    port = free_port()
    root = copy_pointing_at(built, tmp_path, f"http://127.0.0.1:{port}/v1/embeddings")
    srv = hostile(mode, port)
    r, secs, peak = capped("query", "kettle", "--json", cwd=root, env={"FOLIO_ENDPOINT": srv.url},
                           timeout=TIMEOUT if mode in CLOCKED else 5)
    bounded(r, secs, peak)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["mode"] == "lexical" and d["results"], d
    said = [n for n in d["notices"] if srv.url in n]
    assert len(said) == 1 and QUERY_SAYS[mode] in said[0] and "ranking lexically" in said[0], d["notices"]


@pytest.mark.parametrize("mode", ["html-200", "html-404"])
def test_doctor_against_a_web_server_names_the_url_and_the_path_and_port_to_check(tmp_path, hostile, mode):
    # it quoted the page's HTML, without the URL (HTTP 200) or with a fix that did not fit (HTTP 404:
    # "should end in /v1/embeddings", which it did)
    srv = hostile(mode)
    root = write_tree(tmp_path / "c", DOCS)
    r, secs, peak = capped("doctor", "--endpoint", srv.url, cwd=root, timeout=5)
    bounded(r, secs, peak)
    assert r.returncode == 1, r.stderr
    reach = next(ln for ln in r.stdout.splitlines() if ln.startswith("FAIL  reachable"))
    assert srv.url + SAYS[mode].removeprefix("/v1/embeddings") in reach, reach
    assert "check the port" in reach and "/v1/embeddings" in reach.split("check the port")[1], reach
    assert "<html" not in r.stdout.lower()
    r, _, _ = capped("doctor", "--endpoint", srv.url.removesuffix("/v1/embeddings"), cwd=root, timeout=5)
    assert "the path: / is not /v1/embeddings" in r.stdout, r.stdout


@pytest.mark.parametrize("mode", ["chunked", "gzip-bomb", "trickle-head", "continue", "not-http"])
def test_a_no_op_index_checking_the_space_against_a_hostile_server_ends_small(built, tmp_path, hostile, mode):
    port = free_port()
    root = copy_pointing_at(built, tmp_path, f"http://127.0.0.1:{port}/v1/embeddings")
    srv = hostile(mode, port)
    r, secs, peak = capped("index", "--json", cwd=root, env={"FOLIO_ENDPOINT": srv.url},
                           timeout=TIMEOUT if mode in CLOCKED | {"trickle-head", "continue"} else 5)
    bounded(r, secs, peak)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["embedded"] == 0
    assert f"the server at {srv.url} did not answer the fingerprint probe" in r.stderr, r.stderr
    assert secs < 2 * TIMEOUT + 5


@pytest.mark.parametrize("mode", ["huge-length", "no-length", "gzip-bomb", "trickle-body", "continue-slow",
                                  "headers", "not-http"])
def test_the_httpx_path_through_a_proxy_holds_the_same_bounds(tmp_path, hostile, mode):
    """With a proxy configured folio's requests go through httpx: the hostile server is the proxy."""
    srv = hostile(mode)
    proxy = srv.url.removesuffix("/v1/embeddings")
    root = write_tree(tmp_path / "c", DOCS)
    url = f"http://127.0.0.1:{free_port()}/v1/embeddings"  # never reached: the proxy answers for it
    env = {"HTTP_PROXY": proxy, "http_proxy": None, "NO_PROXY": None, "no_proxy": None, "ALL_PROXY": None,
           "all_proxy": None}
    r, secs, peak = capped("index", "--endpoint", url, cwd=root, env=env, timeout=TIMEOUT if mode in CLOCKED else 5)
    bounded(r, secs, peak)
    assert r.returncode == 1, r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("folio: ")]
    assert len(errors) == 1 and url in errors[0], r.stderr
    says = {"gzip-bomb": "expands past", "trickle-body": f"bytes of its body after {TIMEOUT} s",
            "continue-slow": f"after {TIMEOUT} s", "headers": "not HTTP"}.get(mode, SAYS[mode])
    assert says in errors[0], errors[0]
