"""Servers frame their answers differently (chunked, ended by closing, gzip, an interim 100, kept
connections closed at once): folio's requests to a server on this machine (folio/wire.py, no httpx)
read every one of them, index and query alike, in one request or many at once."""

from __future__ import annotations

import json

import pytest

DOCS = {
    "finance/revenue.md": "# Revenue\n\nOverview of money.\n\n## Recognition\n\nIncome is booked at delivery.\n",
    "ops/runbook.md": "# Runbook\n\n## Restart\n\nBegin with a drain.\n\n## Delete caches\n\nErase the cache.\n",
    "notes/car.md": "# Cars\n\nAn automobile is large.\n",
}
SECTIONS = 6


def _index_and_query(root, run_folio) -> tuple[dict, dict]:
    r = run_folio("index", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    q = run_folio("query", "erase the cache", "--json", "--mode", "semantic", cwd=root)  # the vectors' own scores
    assert q.returncode == 0, q.stderr
    return json.loads(r.stdout), json.loads(q.stdout)


@pytest.mark.parametrize("framing", ["chunked", "close", "gzip", "continue", "drop-idle"])
def test_every_framing_of_an_answer_is_read_alike(tmp_path, write_tree, fake_server, run_folio, framing):
    plain, framed = fake_server(dim=32), fake_server(dim=32, framing=framing)
    answers = []
    for name, srv in (("plain", plain), (framing, framed)):
        # two inputs a request, two requests at once: kept connections are taken, given back, reused
        root = write_tree(tmp_path / name, {**DOCS, "folio.yaml": f"endpoint: {srv.url}\nbatch_size: 2\njobs: 2\n"})
        rep, q = _index_and_query(root, run_folio)
        assert rep["embedded"] == SECTIONS and rep["lexical_only"] is False and not rep["notices"], rep
        assert q["mode"] == "semantic" and q["results"][0]["path"] == "ops/runbook.md", q
        answers.append([(h["path"], h["start"], h["score"]) for h in q["results"]])
        assert srv.stats()["ok"] >= 4  # the fingerprint, three requests of two, the question
    assert answers[0] == answers[1]  # the same vectors, whatever the framing


def test_a_server_that_answers_something_else_than_http_is_named_and_leaves_the_lexical_plane(tmp_path, write_tree,
                                                                                              run_folio):
    import socket
    import threading

    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(16)
    port = lsock.getsockname()[1]

    def serve():
        while True:
            try:
                conn, _ = lsock.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")

    serving = threading.Thread(target=serve, daemon=True)
    serving.start()
    try:
        url = f"http://127.0.0.1:{port}/v1/embeddings"
        root = write_tree(tmp_path / "c", {**DOCS, "folio.yaml": f"endpoint: {url}\n"})
        r = run_folio("index", "--json", cwd=root)
        # something answered at the endpoint folio.yaml names: said for what it is, not "nobody there"
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
        assert json.loads(r.stdout)["sections"] == SECTIONS
        [line] = [ln for ln in r.stderr.splitlines() if ln.startswith("folio: ")]
        assert f"the server at {url} answered a request of 1 input with an answer that is not HTTP (it began " \
               f"'SSH-2.0-OpenSSH_9.6" in line and "every file is in the lexical plane" in line, line
        assert "no embeddings server answers" not in r.stderr
        q = run_folio("query", "erase the cache", "--json", "--mode", "semantic", cwd=root)  # the vectors' own scores
        assert q.returncode == 0, q.stderr
        assert json.loads(q.stdout)["mode"] == "lexical" and json.loads(q.stdout)["results"][0]["path"] == "ops/runbook.md"
    finally:  # shut down: a close alone leaves the thread in accept() (Linux), and the suite's process
        lsock.shutdown(socket.SHUT_RDWR)  # threaded, where folio does not fork its walking child
        lsock.close()
        serving.join(5)


def test_a_large_answer_in_the_widest_form_a_server_writes_is_read_whole(tmp_path, write_tree, run_folio):
    """folio refuses an answer larger than its request can need (issue 30), and a legitimate answer
    never reaches that bound: here every request of 256 inputs gets 2048-dimensional vectors as JSON
    text at full precision, pretty-printed (~29 bytes a number, where llama-server writes 21), an
    answer of ~15 MB, where the floor every answer may take is 4 MiB."""
    import hashlib
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import numpy as np

    sizes = []

    class Wide(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_GET(self):
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self.path != "/v1/embeddings":
                return self.do_GET()
            rows = [np.random.default_rng(int(hashlib.sha256(t.encode()).hexdigest()[:8], 16)).normal(size=2048)
                    for t in body["input"]]
            out = json.dumps({"data": [{"embedding": r.tolist(), "index": i, "object": "embedding"}
                                       for i, r in enumerate(rows)]}, indent=2).encode()
            sizes.append(len(out))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Wide)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}/v1/embeddings"
        docs = {f"n{i:03}.md": f"# Note {i}\n\nThe keeper's log, entry {i}.\n" for i in range(300)}
        root = write_tree(tmp_path / "c", {**docs, "folio.yaml": f"endpoint: {url}\nbatch_size: 256\n"})
        r = run_folio("index", "--json", cwd=root)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["embedded"] == 300
        assert max(sizes) > 14e6 and max(sizes) / (256 * 2048) > 28, sizes  # the answers were that wide
    finally:
        srv.shutdown()
        srv.server_close()
