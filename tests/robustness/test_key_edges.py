"""The API key and URL credentials at the edges (issue 15, item 8; issue 30): a server that echoes
the key URL-encoded, in base64, in hex, upper-cased or in HTML character references does not get it
printed, a key of any length is kept out of sentences,
and `user:password@` in an endpoint URL is refused with the fix instead of being printed in
`query --json`, recorded in index.db, and sent as Basic auth in plaintext."""

from __future__ import annotations

import base64
import json
import sqlite3
from urllib.parse import quote

import pytest
from helpers import run_folio, write_tree

DOCS = {"a.md": "# Alpha\n\nThe lighthouse keeper trims the wick.\n", "b.md": "# Beta\n\nA kettle of tea.\n"}
KEY = "sk-folio+test/7f3a=9c d"  # URL-encoding and base64 both change it


def forms(key: str) -> set[str]:
    """What must not be printed, in any case: the key and its encodings (HTML: as the fake server
    writes it, and the key's own characters between its references)."""
    return {key, quote(key, safe=""), base64.b64encode(key.encode()).decode(), key.encode().hex(),
            "".join(f"&#{ord(c)};" if not c.isalnum() else c for c in key)}


@pytest.mark.parametrize("echo", ["plain", "url", "base64", "hex", "upper", "html"])
def test_a_server_echoing_the_key_in_any_form_does_not_get_it_printed(tmp_path, fake_server, echo):
    srv = fake_server(dim=16, api_key="the-right-one")
    srv.control(echo_key=echo)
    root = write_tree(tmp_path / "c", DOCS)
    r = run_folio("index", "--endpoint", srv.url, "--json", cwd=root, env={"FOLIO_API_KEY": KEY})
    assert r.returncode == 1, r.stderr
    assert "refused the credentials" in r.stderr and "Invalid API Key: (your API key)" in r.stderr, r.stderr
    for form in forms(KEY):
        assert form.casefold() not in (r.stdout + r.stderr).casefold(), (form, r.stderr)
    assert srv.stats()["last_authorization"] == f"Bearer {KEY}"  # the echo was really there to scrub


@pytest.mark.parametrize("key", ["z", "k7", "q9x"])
def test_a_short_key_is_never_printed_either(tmp_path, fake_server, key):
    srv = fake_server(dim=16, api_key="the-right-one")
    srv.control(echo_key="plain")
    root = write_tree(tmp_path / "c", DOCS)
    r = run_folio("index", "--endpoint", srv.url, cwd=root, env={"FOLIO_API_KEY": key})
    assert r.returncode == 1, r.stderr
    assert "refused the credentials" in r.stderr
    assert f"Invalid API Key: {key}" not in r.stderr
    assert "withheld: it holds your API key" in r.stderr, r.stderr


def test_credentials_in_an_endpoint_url_are_refused_wherever_it_is_named(tmp_path, fake_server, _isolate_env):
    srv = fake_server(dim=16)
    secret = "hunter2pw"
    url = srv.url.replace("http://", f"http://me:{secret}@")
    root = write_tree(tmp_path / "c", DOCS)
    for args, env, code in ((["index", "--endpoint", url], {}, 2), (["index"], {"FOLIO_ENDPOINT": url}, 1),
                            (["doctor", "--endpoint", url], {}, 2), (["config", "set", "endpoint", url], {}, 2)):
        r = run_folio(*args, cwd=root, env=env)
        assert r.returncode == code, (args, r.stderr)
        assert "with credentials" in r.stderr and "FOLIO_API_KEY" in r.stderr, r.stderr
        assert secret not in r.stdout + r.stderr and "me:" not in r.stderr
    assert not (root / ".folio").exists()
    assert srv.stats()["requests"] == 0
    (root / "folio.yaml").write_text(f"endpoint: {url}\n")
    r = run_folio("index", cwd=root)
    assert r.returncode == 1 and "folio.yaml" in r.stderr and secret not in r.stderr, r.stderr
    assert not (_isolate_env / ".config" / "folio" / "config.yaml").exists() or \
        secret not in (_isolate_env / ".config" / "folio" / "config.yaml").read_text()


def test_credentials_recorded_in_an_index_are_neither_printed_nor_sent(tmp_path, fake_server):
    srv = fake_server(dim=16)
    root = write_tree(tmp_path / "c", DOCS)
    assert run_folio("index", "--endpoint", srv.url, cwd=root).returncode == 0
    secret = "hunter2pw"
    with sqlite3.connect(root / ".folio" / "index.db") as c:  # an older folio's index, or a planted one
        c.execute("UPDATE meta SET value = ? WHERE key = 'endpoint'", (srv.url.replace("http://", f"http://me:{secret}@"),))
    c.close()
    srv.control(reset_stats=True)
    r = run_folio("query", "lighthouse", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["endpoint"] == srv.url
    for args in (["status"], ["status", "--json"], ["query", "tea"]):
        r = run_folio(*args, cwd=root)
        assert r.returncode == 0 and secret not in r.stdout + r.stderr, r.stderr
    stats = srv.stats()
    assert stats["requests"] >= 2 and stats["auth_requests"] == 0  # no Basic auth went out
    # the next `folio index` (a writer) removes them from index.db itself
    r = run_folio("index", cwd=root)
    assert r.returncode == 0 and secret not in r.stdout + r.stderr, r.stderr
    assert not any(secret.encode() in p.read_bytes() for p in (root / ".folio").iterdir() if p.is_file())
    assert json.loads(run_folio("status", "--json", cwd=root).stdout)["endpoint"] == srv.url
