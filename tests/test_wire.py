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
    q = run_folio("query", "erase the cache", "--json", cwd=root)
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


def test_a_server_that_answers_something_else_than_http_leaves_the_lexical_plane(tmp_path, write_tree, run_folio):
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

    threading.Thread(target=serve, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{port}/v1/embeddings"
        root = write_tree(tmp_path / "c", {**DOCS, "folio.yaml": f"endpoint: {url}\n"})
        r = run_folio("index", "--json", cwd=root)
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
        rep = json.loads(r.stdout)
        assert rep["lexical_only"] is True and rep["sections"] == SECTIONS, rep
        assert f"no embeddings server answers at {url}" in r.stderr and "built the lexical plane only" in r.stderr
        q = run_folio("query", "erase the cache", "--json", cwd=root)
        assert q.returncode == 0, q.stderr
        assert json.loads(q.stdout)["mode"] == "lexical" and json.loads(q.stdout)["results"][0]["path"] == "ops/runbook.md"
    finally:
        lsock.close()
