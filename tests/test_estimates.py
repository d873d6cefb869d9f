"""How long indexing will take, as a user is told it: `folio doctor` times the server on the
corpus's own sections and says what that means for the sections not embedded yet."""

from __future__ import annotations

import json
import re

import pytest
from helpers import free_port


def speed_line(stdout: str) -> str:
    return next(ln for ln in stdout.splitlines() if ln.split()[1:2] == ["speed"])


def notes(files: int, sections: int) -> dict[str, str]:
    """`files` small Markdown files of a title and `sections` sections each (one line of words)."""
    return {f"d{i:02}.md": "# T\n\n" + "\n\n".join(f"## S{j}\n\nwords {i} {j}" for j in range(sections))
            for i in range(files)}


def test_doctor_measures_throughput_and_estimates_the_sections_left(corpus_copy, fake_server, run_folio):
    root = corpus_copy("rust-book")
    down = f"http://127.0.0.1:{free_port()}/v1/embeddings"
    assert run_folio("index", cwd=root, env={"FOLIO_ENDPOINT": down}).returncode == 0  # lexical only
    sections = json.loads(run_folio("status", "--json", cwd=root).stdout)["sections"]

    srv = fake_server(dim=32, delay_ms=200)  # 64 sections in 2 requests of 32: about 0.4 s
    r = run_folio("doctor", "--endpoint", srv.url, "--json", cwd=root)
    check = {c["name"]: c for c in json.loads(r.stdout)["checks"]}["speed"]
    d = check["data"]
    assert check["status"] == "pass" and d["sections"] == 64
    assert d["seconds"] >= 0.3 and abs(d["sections_per_s"] - 64 / d["seconds"]) < 1  # 2 x 200 ms at least
    # every file is indexed (lexically), so the count is the index's own: exact, no "~"
    assert d["not_embedded"] == sections
    assert abs(d["estimate_s"] - sections / d["sections_per_s"]) < 1
    r = run_folio("doctor", "--endpoint", srv.url, cwd=root)
    line = speed_line(r.stdout)
    assert re.search(rf"ok\s+speed\s+[\d,]+ sections/s \(64 sections of this corpus in [\d.]+ s, [\d,]+ characters/s\): "
                     rf"about \d+ (seconds?|minutes) for the {sections:,} sections not embedded yet", line), line

    # once the index holds every vector there is nothing left to estimate
    assert run_folio("index", "--endpoint", srv.url, cwd=root).returncode == 0
    r = run_folio("doctor", "--endpoint", srv.url, cwd=root)
    assert "every section of this corpus has its vector" in speed_line(r.stdout)


def test_doctor_without_an_index_estimates_from_the_sample(tmp_path, write_tree, fake_server, run_folio):
    files = notes(30, 9)
    root = write_tree(tmp_path / "c", files)
    srv = fake_server(dim=32)
    r = run_folio("doctor", "--endpoint", srv.url, "--json", cwd=root)
    d = {c["name"]: c for c in json.loads(r.stdout)["checks"]}["speed"]["data"]
    assert abs(d["not_embedded"] - 300) <= 15  # 30 files of 10 sections, estimated by size
    assert "for the ~" in speed_line(run_folio("doctor", "--endpoint", srv.url, cwd=root).stdout)


def test_doctor_times_a_server_that_takes_fewer_tokens_than_some_sections(corpus_copy, fake_server, run_folio):
    """rust-book's longest sections are over 512 tokens: doctor times its sample as `folio index` would
    send it (divided where the long-input probe says, a batch still refused halved), not skipped."""
    root = corpus_copy("rust-book")
    srv = fake_server(dim=32, max_tokens=512)
    r = run_folio("doctor", "--endpoint", srv.url, "--json", cwd=root)
    checks = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    assert checks["long input"]["data"]["verdict"] == "divides", checks["long input"]
    speed = checks["speed"]
    assert speed["status"] == "pass", speed
    assert 48 <= speed["data"]["sections"] <= 64 and speed["data"]["sections_per_s"] > 0


def test_doctor_samples_the_whole_corpus_not_its_first_files(tmp_path, write_tree, fake_server, run_folio):
    """In path order the first files are dense (20 short sections each), the rest sparse (2 long
    ones): the sections doctor expects come from files spread over the corpus, and records spread
    over those files, so its count is near the index's own (the first files alone give ~4x)."""
    files = {}
    for f in range(80):
        files[f"a{f:03d}.md"] = f"# Dense {f}\n" + "".join(f"\n## Dense {f}-{s}\n\nShort note {f} {s}.\n"
                                                           for s in range(20))
        files[f"b{f:03d}.md"] = f"# Sparse {f}\n" + "".join(
            f"\n## Sparse {f}-{s}\n\n" + f"Long paragraph {f} {s} about harbours. " * 30 + "\n" for s in range(2))
    root = write_tree(tmp_path / "c", files)
    srv = fake_server(dim=32)
    d = {c["name"]: c for c in json.loads(run_folio("doctor", "--endpoint", srv.url, "--json",
                                                    cwd=root).stdout)["checks"]}["speed"]["data"]
    down = f"http://127.0.0.1:{free_port()}/v1/embeddings"
    assert run_folio("index", cwd=root, env={"FOLIO_ENDPOINT": down}).returncode == 0  # lexical only: the count
    sections = json.loads(run_folio("status", "--json", cwd=root).stdout)["sections"]
    assert sections / 1.25 <= d["not_embedded"] <= sections * 1.25, (d["not_embedded"], sections)


def test_doctor_counts_every_section_of_an_index_due_to_be_embedded_anew(tmp_path, write_tree, fake_server,
                                                                         run_folio):
    """An index whose vectors were embedded from an older record text is re-embedded whole by the next
    `folio index` (status says so): doctor's estimate counts every section, not "every section has
    its vector"."""
    import sqlite3

    from helpers_index import backdate

    files = notes(10, 4)
    root = write_tree(tmp_path / "c", files)
    backdate(root)
    srv = fake_server(dim=32)
    assert run_folio("index", "--endpoint", srv.url, cwd=root).returncode == 0
    sections = json.loads(run_folio("status", "--json", cwd=root).stdout)["sections"]
    with sqlite3.connect(root / ".folio" / "index.db") as c:
        c.execute("DELETE FROM meta WHERE key = 'text'")
        c.execute("UPDATE records SET text_hash = 'source:' || text_hash")  # keys of the older version
    r = run_folio("doctor", "--endpoint", srv.url, "--json", cwd=root)
    d = {c["name"]: c for c in json.loads(r.stdout)["checks"]}["speed"]["data"]
    assert d["not_embedded"] == sections, d
    srv.control(reset_stats=True)
    rep = json.loads(run_folio("index", "--endpoint", srv.url, "--json", cwd=root).stdout)
    assert rep["embedded"] == sections, rep  # what the estimate said the run would do
    r = run_folio("doctor", "--endpoint", srv.url, cwd=root)
    assert "every section of this corpus has its vector" in speed_line(r.stdout)


@pytest.mark.parametrize("dim", [16, 32], ids=["another-dimension", "same-dimension"])
def test_doctor_counts_every_section_when_the_server_is_of_another_space(tmp_path, write_tree, fake_server,
                                                                          run_folio, dim):
    """doctor pointed at a server of another vector space than the index's: another dimension (its
    reachable line said `folio index` would re-embed every section), or another model in the same
    dimension (many small models answer in 384), told by the fingerprint probe as the run tells it.
    The estimate counted none left, then `folio index` re-embedded them all; now it counts them all,
    and the index's own server (or the new one once indexed) is said to keep its vectors."""
    root = write_tree(tmp_path / "c", notes(10, 4))
    built = fake_server(dim=32)
    assert run_folio("index", "--endpoint", built.url, cwd=root).returncode == 0
    sections = json.loads(run_folio("status", "--json", cwd=root).stdout)["sections"]
    other = fake_server(dim=dim, space="b")
    r = run_folio("doctor", "--endpoint", other.url, "--json", cwd=root)
    checks = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    assert checks["speed"]["data"]["not_embedded"] == sections, checks["speed"]
    said = "the index holds 32-dimensional vectors" if dim != 32 else "in another space than the index's"
    assert any(said in d and "would re-embed every section" in d for d in checks["reachable"]["detail"]), checks
    line = speed_line(run_folio("doctor", "--endpoint", other.url, cwd=root).stdout)
    assert f"for the {sections:,} sections not embedded yet" in line and "1 seconds" not in line, line
    r = run_folio("doctor", "--endpoint", built.url, "--json", cwd=root)
    assert {c["name"]: c for c in json.loads(r.stdout)["checks"]}["speed"]["data"]["not_embedded"] == 0
    other.control(reset_stats=True)
    rep = json.loads(run_folio("index", "--endpoint", other.url, "--json", cwd=root).stdout)
    assert rep["embedded"] == sections, rep  # as doctor said
    r = run_folio("doctor", "--endpoint", other.url, cwd=root)
    assert "the index's vectors are in this server's vector space: `folio index` keeps them" in r.stdout, r.stdout
    assert "every section of this corpus has its vector" in speed_line(r.stdout)
