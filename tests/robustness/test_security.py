"""No one gets in: the API key goes only where the user's own settings send it and shows up nowhere
else (output, errors, files), and no YAML folio reads can make it construct an object or run
anything. The fake server's `--api-key` and its `/stats` (`auth_requests`, `last_authorization`)
prove where the key went; respx stands in for hosts off the loopback, which a test cannot reach.

`folio show` path refusals are tested in tests/test_lexical_cli.py (issue 6); the last test here adds
the cases it does not try."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest
import respx
from fakeserver import Embedder
from helpers import FakeServer, run_folio, write_tree

from folio.embed import Client, EndpointError

KEY = "sk-folio-test-7f3a9c0d2e1b"
DOCS = {"a.md": "# Alpha\n\nThe lighthouse keeper trims the wick.\n", "b.md": "# Beta\n\nA kettle of tea.\n"}


def user_config(home: Path, text: str) -> Path:
    p = home / ".config" / "folio" / "config.yaml"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def every_byte_under(*roots: Path) -> bytes:
    out = b""
    for root in roots:
        for dirpath, _dirs, files in os.walk(root):
            for f in files:
                p = os.path.join(dirpath, f)
                if os.path.isfile(p):
                    with open(p, "rb") as fh:
                        out += fh.read()
    return out


# ------------------------------------------------------------------ where the key goes


def test_the_key_reaches_a_flag_named_server_and_nothing_else(tmp_path, _isolate_env):
    home = _isolate_env
    srv = FakeServer(dim=32, api_key=KEY)
    try:
        root = write_tree(tmp_path / "c", DOCS)
        env = {"FOLIO_API_KEY": KEY}
        runs = [run_folio("index", "--endpoint", srv.url, "--json", cwd=root, env=env)]
        assert runs[0].returncode == 0, runs[0].stderr
        assert srv.stats()["last_authorization"] == f"Bearer {KEY}"
        # Queries use the endpoint the index recorded; the key goes along because the user's own
        # settings name it too (a recorded endpoint alone is not enough: see below).
        env["FOLIO_ENDPOINT"] = srv.url
        for args in (["query", "lighthouse keeper", "--json"], ["query", "tea"], ["status", "--json"], ["status"],
                     ["config"], ["config", "--json"], ["index", "--json"]):
            runs.append(run_folio(*args, cwd=root, env=env))
            assert runs[-1].returncode == 0, (args, runs[-1].stderr)
        runs.append(run_folio("doctor", "--json", cwd=root, env=env))  # its verdict on the fake model aside
        assert runs[-1].stdout.startswith("{") and srv.stats()["last_authorization"] == f"Bearer {KEY}"
        # the key in folio.yaml is refused, and saying so does not repeat it
        runs.append(run_folio("config", "set", "--project", "api_key", KEY, cwd=root))
        assert runs[-1].returncode == 2  # a usage error: the key typed cannot go where --project sends it
        runs.append(run_folio("config", "set", "--project", "endpoint", srv.url, cwd=root, env=env))
        assert runs[-1].returncode == 0
        # the user config may hold it (owner-only), and `config set` does not echo it
        runs.append(run_folio("config", "set", "api_key", KEY, cwd=root))
        assert runs[-1].returncode == 0 and "api_key = (set)" in runs[-1].stderr
        cfg = home / ".config" / "folio" / "config.yaml"
        assert KEY in cfg.read_text() and (cfg.stat().st_mode & 0o077) == 0
        # a server that refuses the key: the error names the fix, not the key
        srv.control(api_key="another-key")
        (root / "a.md").write_text("# Alpha\n\nchanged.\n")
        runs.append(run_folio("index", "--endpoint", srv.url, cwd=root, env=env))
        assert runs[-1].returncode == 1 and "refused the credentials" in runs[-1].stderr
        runs.append(run_folio("query", "tea", cwd=root, env=env))  # answered lexically, saying why
        assert runs[-1].returncode == 0 and "refused the credentials" in runs[-1].stderr
        for r in runs:
            assert KEY not in r.stdout and KEY not in r.stderr, r.args
        assert KEY.encode() not in every_byte_under(root)  # .folio/ and folio.yaml
    finally:
        srv.stop()


def test_an_endpoint_named_only_by_folio_yaml_never_gets_the_key(tmp_path, _isolate_env):
    home = _isolate_env
    srv = FakeServer(dim=32)  # accepts any request, and counts Authorization headers
    try:
        root = write_tree(tmp_path / "c", {**DOCS, "folio.yaml": f"endpoint: {srv.url}\n"})
        env = {"FOLIO_API_KEY": KEY}
        r = run_folio("index", "--json", cwd=root, env=env)
        assert r.returncode == 0, r.stderr
        assert "an API key is configured but not sent: the endpoint comes from folio.yaml" in r.stderr
        assert json.loads(r.stdout)["embedded"] == 2
        r = run_folio("query", "lighthouse keeper", "--json", cwd=root, env=env)
        assert r.returncode == 0 and json.loads(r.stdout)["mode"] == "hybrid"
        assert srv.stats()["requests"] > 0 and srv.stats()["auth_requests"] == 0
        # Only the user's own config can vouch for the host.
        user_config(home, "key_hosts: [127.0.0.1]\n")
        (root / "b.md").write_text("# Beta\n\nA kettle of green tea.\n")
        assert run_folio("index", cwd=root, env=env).returncode == 0
        assert srv.stats()["last_authorization"] == f"Bearer {KEY}"
    finally:
        srv.stop()


def test_a_server_needing_the_key_behind_folio_yaml_says_why_it_was_not_sent(tmp_path):
    srv = FakeServer(dim=32, api_key=KEY)
    try:
        root = write_tree(tmp_path / "c", {**DOCS, "folio.yaml": f"endpoint: {srv.url}\n"})
        r = run_folio("index", cwd=root, env={"FOLIO_API_KEY": KEY})
        assert r.returncode == 1 and "Traceback" not in r.stderr
        line = r.stderr.strip().splitlines()[-1]
        assert "refused the credentials" in line
        assert "yours was not sent: the endpoint comes from folio.yaml" in line and "key_hosts" in line
        assert srv.stats()["auth_requests"] == 0
    finally:
        srv.stop()


def test_an_endpoint_recorded_in_an_index_cannot_redirect_the_key(tmp_path):
    # `.folio/` can come from a clone as well: whatever it records, the key follows only the user's
    # settings. Here the index is edited to name another server and to claim a flag named it.
    import sqlite3

    a, b = FakeServer(dim=32), FakeServer(dim=32)  # same space: b answers like a
    try:
        root = write_tree(tmp_path / "c", DOCS)
        env = {"FOLIO_API_KEY": KEY}
        assert run_folio("index", "--endpoint", a.url, cwd=root, env=env).returncode == 0
        assert a.stats()["last_authorization"] == f"Bearer {KEY}"
        with sqlite3.connect(root / ".folio" / "index.db") as db:
            db.execute("UPDATE meta SET value = ? WHERE key = 'endpoint'", (b.url,))
            db.execute("UPDATE meta SET value = 'flag' WHERE key = 'endpoint_source'")
        r = run_folio("query", "lighthouse keeper", "--json", cwd=root, env=env)
        assert r.returncode == 0 and json.loads(r.stdout)["mode"] == "hybrid"
        (root / "a.md").write_text("# Alpha\n\nThe lighthouse keeper trims two wicks.\n")
        assert run_folio("index", cwd=root, env=env).returncode == 0
        assert b.stats()["requests"] >= 2 and b.stats()["auth_requests"] == 0
        # Once the user's own settings name it, it is theirs.
        r = run_folio("query", "kettle", cwd=root, env={**env, "FOLIO_ENDPOINT": b.url})
        assert r.returncode == 0 and b.stats()["last_authorization"] == f"Bearer {KEY}"
    finally:
        a.stop()
        b.stop()


# ------------------------------------------------------------------ hosts off the loopback (respx)


def _fake_embeddings(request: httpx.Request) -> httpx.Response:
    body = json.loads(request.content)
    texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
    vecs = Embedder(16).embed(texts)
    return httpx.Response(200, json={"data": [{"index": i, "embedding": v.tolist()} for i, v in enumerate(vecs)]})


def _folio_in_process(monkeypatch, capsys, *argv) -> tuple[int, str]:
    from folio.cli import main

    monkeypatch.setattr(sys, "argv", ["folio", *map(str, argv)])
    with pytest.raises(SystemExit) as e:
        main()
    return e.value.code, capsys.readouterr().err


@pytest.mark.parametrize(("endpoint", "insecure", "sent"), [
    ("http://embeddings.example.test/v1/embeddings", False, False),  # plaintext off the loopback
    ("http://embeddings.example.test/v1/embeddings", True, True),  # ... unless the user allows it
    ("https://embeddings.example.test/v1/embeddings", False, True),
])
def test_no_key_in_plaintext_off_the_loopback_unless_allowed(tmp_path, monkeypatch, capsys, _isolate_env,
                                                              endpoint, insecure, sent):
    if insecure:
        user_config(_isolate_env, "allow_insecure_key: true\n")
    monkeypatch.setenv("FOLIO_API_KEY", KEY)
    monkeypatch.setenv("FOLIO_ENDPOINT", endpoint)  # the user's own setting, for index and query alike
    root = write_tree(tmp_path / "c", DOCS)
    monkeypatch.chdir(root)
    base = endpoint.removesuffix("/v1/embeddings")
    with respx.mock(assert_all_mocked=True, assert_all_called=False) as mock:
        route = mock.post(endpoint).mock(side_effect=_fake_embeddings)
        # what a hosted server without llama-server's extras answers (folio asks for the model's
        # context and token counts): the key follows the same rule there
        extras = [mock.get(url__startswith=base + "/").mock(return_value=httpx.Response(404)),  # /v1/models, /slots
                  mock.post(base + "/tokenize").mock(return_value=httpx.Response(404))]
        code, err = _folio_in_process(monkeypatch, capsys, "index", root)
        assert code == 0, err
        code, err2 = _folio_in_process(monkeypatch, capsys, "query", "lighthouse")
        assert code == 0, err2
    assert route.call_count >= 3
    auth = {c.request.headers.get("authorization") for r in (route, *extras) for c in r.calls}
    assert auth == ({f"Bearer {KEY}"} if sent else {None})
    if not sent:
        assert "not sent: plain http off the loopback" in err
    assert KEY not in err + err2


@respx.mock
def test_a_server_echoing_the_key_does_not_put_it_in_a_sentence():
    url = "https://embeddings.example.test/v1/embeddings"
    for resp in (httpx.Response(401, json={"error": {"message": f"invalid api key {KEY}"}}),
                 httpx.Response(500, text=f"upstream said: Authorization: Bearer {KEY}"),
                 httpx.Response(200, text=f"<html><title>Denied {KEY}</title></html>"),  # a page's title is quoted
                 httpx.Response(429, json={"error": {"message": f"quota exceeded for {KEY}"}})):
        respx.post(url).mock(return_value=resp)
        with pytest.raises(EndpointError) as e:
            Client(url, "m", api_key=KEY, busy_retries=0).embed(["x"])
        assert KEY not in str(e.value) and "(your API key)" in str(e.value), str(e.value)


# ------------------------------------------------------------------ YAML builds no objects


EXPLOITS = [
    '!!python/object/apply:os.system ["touch {marker}"]',
    '!!python/object/apply:subprocess.check_call [["touch", "{marker}"]]',
    "!!python/object/new:os.system [touch {marker}]",
    "!!python/name:os.system",
]


@pytest.mark.parametrize("exploit", EXPLOITS)
def test_a_folio_yaml_cannot_run_anything(tmp_path, exploit, _isolate_env):
    marker = tmp_path / "PWNED"
    root = write_tree(tmp_path / "c", {**DOCS, "folio.yaml": f"endpoint: {exploit.format(marker=marker)}\n"})
    for args in (["config"], ["index"], ["status"]):
        r = run_folio(*args, cwd=root)
        assert r.returncode == 1 and "Traceback" not in r.stderr, (args, r.stderr)
        assert r.stderr.startswith(f"folio: {root / 'folio.yaml'}"), r.stderr
    user_config(_isolate_env, f"model: {exploit.format(marker=marker)}\n")
    (root / "folio.yaml").unlink()
    r = run_folio("config", cwd=root)
    assert r.returncode == 1 and "Traceback" not in r.stderr and "config.yaml" in r.stderr
    assert not marker.exists()


@pytest.mark.parametrize("exploit", EXPLOITS)
def test_frontmatter_cannot_run_anything(tmp_path, fake_server, exploit):
    marker = tmp_path / "PWNED"
    srv = fake_server(dim=16)
    root = write_tree(tmp_path / "c", {"x.md": f"---\nid: x1\nevil: {exploit.format(marker=marker)}\n---\n"
                                               f"# X\n\nbody words\n"})
    r = run_folio("index", "--endpoint", srv.url, cwd=root)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    top = json.loads(run_folio("query", "body words", "--json", cwd=root).stdout)["results"][0]
    assert top["frontmatter"]["id"] == "x1"  # read as data (source text), never constructed
    assert not marker.exists()


def test_a_yaml_alias_bomb_in_folio_yaml_is_refused_quickly(tmp_path):
    lines = ['a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for i, name in enumerate("bcdefghi"):
        prev = "abcdefghi"[i]
        lines.append(f"{name}: &{name} [{', '.join(['*' + prev] * 9)}]")
    lines.append("exclude: *i")
    root = write_tree(tmp_path / "c", {**DOCS, "folio.yaml": "\n".join(lines) + "\n"})
    r = run_folio("config", cwd=root, timeout=60)
    assert r.returncode == 1 and "Traceback" not in r.stderr


def test_vectors_in_the_index_are_data_not_code(tmp_path, fake_server):
    # The lexical segments are .npy files: they are loaded without pickle, so an object array
    # planted in .folio/ is refused as damage instead of being unpickled.
    srv = fake_server(dim=16)
    root = write_tree(tmp_path / "c", DOCS)
    assert run_folio("index", "--endpoint", srv.url, cwd=root).returncode == 0
    seg = next((root / ".folio" / "lex").rglob("terms.npy"))
    np.save(seg, np.array([{"payload": "object"}], dtype=object), allow_pickle=True)
    r = run_folio("query", "kettle", "--lexical", cwd=root)
    assert r.returncode == 1 and "is damaged" in r.stderr and "Traceback" not in r.stderr


def test_show_refuses_what_tests_lexical_cli_does_not_try(tmp_path, fake_server):
    # tests/test_lexical_cli.py covers ../, absolute paths and a symlinked file; these are the rest:
    # a symlinked directory out of the corpus, a FIFO (must not block), a directory, the index itself.
    srv = fake_server(dim=16)
    outside = write_tree(tmp_path / "out", {"secret.md": "# Secret\n\nkeep out\n"})
    root = write_tree(tmp_path / "c", {"docs/a.md": "# A\n\nhello\n"})
    os.symlink(outside, root / "docs" / "outdir")
    os.mkfifo(root / "docs" / "pipe.md")
    assert run_folio("index", "--endpoint", srv.url, cwd=root).returncode == 0
    for spec, why in (("docs/outdir/secret.md:1-2", "outside the corpus"),
                      ("docs/pipe.md:1-2", "it is a FIFO"),
                      ("docs:1-2", "it is a directory"),
                      (".folio/index.db:1-2", "not in the index")):
        r = run_folio("show", spec, cwd=root, timeout=30)
        assert r.returncode == 1 and r.stdout == "", (spec, r.stdout, r.stderr)
        assert "keep out" not in r.stderr and "Traceback" not in r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("folio: ") and why in lines[0], (spec, r.stderr)
