"""A file touched with its bytes unchanged (a `touch`, a checkout) through the real CLI: `folio
status`, `folio ls` and `folio doctor`'s estimate of what is left to embed agree with each other and
with what `folio index` then does (changes.changed is the one verdict)."""

from __future__ import annotations

import json
import os

from helpers import indexed

FILES = {f"notes/n{i}.md": f"---\nstatus: live\n---\n# Note {i}\n\nalpha {i} words.\n\n## Part {i}\n\n"
                          f"beta {i} words here.\n\n## Other {i}\n\ngamma {i} words there.\n"
         for i in range(6)}


def _json(run_folio, root, *args) -> dict:
    r = run_folio(*args, "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _views(run_folio, root, srv) -> tuple[int, dict, dict]:
    """(status's changed count, ls's listing, doctor's speed data)."""
    status = _json(run_folio, root, "status")
    assert status["unindexed"] == 0 and status["deleted"] == 0, status
    r = run_folio("doctor", "--endpoint", srv.url, "--json", cwd=root)  # (exit 1: dim 32 fails its pooling probe)
    speed = {c["name"]: c for c in json.loads(r.stdout)["checks"]}["speed"]
    assert speed["status"] == "pass", speed
    listing = _json(run_folio, root, "ls")  # last: it may write the index (a refresh without the server)
    return status["changed"], listing, speed["data"]


def test_touched_files_are_unchanged_for_status_ls_and_the_estimate_as_for_the_index_run(
        tmp_path, fake_server, run_folio):
    """ls and doctor's estimate compared the stat only: after a `touch` of every file, ls said "6 of the
    files listed changed" (and re-indexed each of them, one lock and one store opened per file) and
    doctor estimated every section as left to embed, while status said 0 changed and `folio index`
    re-stamped the files and embedded nothing."""
    srv = fake_server(dim=32, record=True)
    root = indexed(tmp_path / "c", FILES, srv, run_folio)
    for p in root.rglob("*.md"):
        os.utime(p)  # a checkout: every file a new mtime, the same bytes

    changed, listing, speed = _views(run_folio, root, srv)
    assert changed == 0
    assert speed["not_embedded"] == 0, speed
    assert listing["notices"] == [], listing["notices"]
    assert {d["freshness"] for d in listing["documents"]} == {"current"}
    # and the index run they speak for: nothing embedded, only the space's probe sent
    srv.control(reset_stats=True)
    r = run_folio("index", cwd=root)
    assert r.returncode == 0, r.stderr
    assert "6 re-stamped" in r.stdout and "0 embedded" in r.stdout, r.stdout
    assert not any("words" in t for t in srv.inputs()), srv.inputs()


def test_an_edit_among_touched_files_is_the_one_change_everywhere(tmp_path, fake_server, run_folio):
    """One file edited to the same size among files all touched: status, ls and the estimate count
    that one, and the index run re-embeds only its changed section."""
    srv = fake_server(dim=32, record=True)
    root = indexed(tmp_path / "c", FILES, srv, run_folio)
    edited = root / "notes/n3.md"
    edited.write_text(edited.read_text().replace("beta 3 words here", "BETA 3 words HERE"))
    for p in root.rglob("*.md"):
        os.utime(p)

    changed, listing, speed = _views(run_folio, root, srv)
    assert changed == 1
    # the estimate: the edited file's sections at the sample's rate, none for the touched ones
    assert 1 <= speed["not_embedded"] <= 2 * 3, speed
    assert [(d["path"], d["freshness"]) for d in listing["documents"] if d["freshness"] != "current"] == [
        ("notes/n3.md", "stale")]
    assert listing["notices"][0].startswith("(1 of the indexed files changed;"), listing["notices"]
    srv.control(reset_stats=True)
    r = run_folio("index", cwd=root)
    assert r.returncode == 0, r.stderr
    assert "1 embedded" in r.stdout and "5 re-stamped" in r.stdout, r.stdout
    sent = [t for t in srv.inputs() if "words" in t]
    assert len(sent) == 1 and "BETA 3 words HERE" in sent[0], sent
    assert _json(run_folio, root, "status")["changed"] == 0


def test_only_a_file_the_stat_cannot_tell_is_read(tmp_path, monkeypatch):
    """The cost: a file whose size and mtime are as stamped, stamped past the racy window, is never
    opened (a no-op `ls` or `status` of 100k files reads none); one inside the window, or with a
    new mtime and the same size, is read and hashed, as `folio index` reads it."""
    import hashlib

    from folio import changes, walk
    from folio.store import Stamp

    (tmp_path / "a.md").write_bytes(b"# A\n")
    sha = hashlib.sha256(b"# A\n").hexdigest()
    reads = []
    real = walk.read_bytes
    monkeypatch.setattr(walk, "read_bytes", lambda root, path: reads.append(path) or real(root, path))
    t = 1_000_000_000_000_000_000
    settled = Stamp(1, "a.md", 4, t, sha, t + changes.RACY_NS)
    assert not changes.changed(tmp_path, "a.md", 4, t, settled) and reads == []
    assert changes.changed(tmp_path, "a.md", 5, t + 1, settled) and reads == []  # another size: no read
    assert not changes.changed(tmp_path, "a.md", 4, t + 1, settled) and reads == ["a.md"]  # touched
    racy = settled._replace(stamped_ns=t + 1)  # stamped in the tick of the write: may hide a second one
    assert changes.changed(tmp_path, "a.md", 4, t, racy._replace(sha256="0" * 64)) and len(reads) == 2
    assert not changes.changed(tmp_path, "a.md", 4, t, racy._replace(sha256="")) and len(reads) == 2
