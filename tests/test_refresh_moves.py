"""A query's refresh of a file whose sections only moved (lines inserted above them) needs no server:
it moves their ranges, keeps their vectors, says so, and says "re-embedded" only when something was.
Through the real CLI against the fake embeddings server."""

from __future__ import annotations

import json

import pytest
from helpers import indexed

DOC = """\
# Retries

## Budget

The retry budget bounds every request with its retries.

## Backoff

Backoff doubles between attempts, up to four seconds.
"""


@pytest.fixture
def corpus(tmp_path, fake_server, run_folio):
    srv = fake_server()
    files = {"retries.md": DOC, "other.md": "# Other\n\nUnrelated words about gardens.\n"}
    return indexed(tmp_path / "c", files, srv, run_folio), srv


def shift(root) -> None:
    """Ten blank lines inserted above every section: the same texts, other line numbers."""
    (root / "retries.md").write_text("\n" * 10 + DOC)


def test_moved_sections_are_refreshed_without_the_server_when_it_fails(corpus, run_folio):
    root, srv = corpus
    srv.stop()  # the server is gone: the question ranks lexically
    shift(root)
    r = run_folio("query", "retry budget", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    top = got["results"][0]
    assert (top["path"], top["start"], top["freshness"]) == ("retries.md", 13, "current")  # was 3: moved by 10
    assert ("(1 of the files behind this result changed; 1 re-indexed without the server (nothing to embed: "
            "no section's text changed, or the file is gone))") in got["notices"]
    # and the index holds the new ranges, every section still with its vector
    st = json.loads(run_folio("status", "--json", cwd=root).stdout)
    assert (st["changed"], st["waiting"], st["embedded"]) == (0, 0, st["sections"])


def test_changed_text_stays_stale_while_the_server_fails(corpus, run_folio):
    root, srv = corpus
    srv.stop()
    (root / "retries.md").write_text(DOC.replace("bounds every request", "bounds each call"))
    r = run_folio("query", "retry budget", "--json", cwd=root)
    got = json.loads(r.stdout)
    assert got["results"][0]["freshness"] == "stale"
    assert any("1 not re-indexed, as their changed sections need the embeddings server, which did not answer"
               in n for n in got["notices"]), got["notices"]


def test_a_refresh_that_embeds_nothing_does_not_say_re_embedded(corpus, run_folio):
    root, srv = corpus
    shift(root)
    before = srv.stats()["inputs"]
    r = run_folio("query", "retry budget", "--mode", "semantic", "--json", cwd=root)
    got = json.loads(r.stdout)
    assert got["results"][0]["start"] == 13
    notice = [n for n in got["notices"] if "behind this result" in n]
    assert notice == ["(1 of the files behind this result had changed; 1 file(s) re-indexed before answering, "
                      "nothing re-embedded (no section's text changed: their lines, their frontmatter or the sections "
                      "around them did))"]
    assert srv.stats()["inputs"] == before + 2  # the question and the fingerprint probe: no section
