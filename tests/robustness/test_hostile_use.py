"""A user's files, environment or server doing something legal or common (issue 41): each gets one
sentence and an intact index, never a traceback, a lost record or all the machine's memory. Through
the real CLI; the cases that could take memory run under an address-space cap."""

from __future__ import annotations

import json
import os
import resource
import subprocess

from helpers import REPO, folio_command, run_folio, write_tree

CAP = 1 << 30  # the address space each capped command may take (its workers and child alike)
C_LOCALE = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0"}  # Python decodes names as ASCII unless told


def test_a_c_locale_keeps_files_with_non_ascii_names(tmp_path, fake_server):
    srv = fake_server(dim=32)
    root = write_tree(tmp_path / "c", {
        "café.md": "---\nlieu: café\n---\n# Café\n\nThe kettle in the café.\n",
        "naïve/résumé.md": "# Résumé\n\nA lighthouse keeper's résumé.\n",
        "plain.md": "# Plain\n\nPlain words.\n",
    })
    r = run_folio("index", "--endpoint", srv.url, cwd=root)
    assert r.returncode == 0, r.stderr
    r = run_folio("index", "--json", cwd=root, env=C_LOCALE)
    assert r.returncode == 0 and r.stderr == "", r.stderr  # no "not UTF-8 ... skipped"
    d = json.loads(r.stdout)
    assert d["deleted"] == 0 and d["removed"] == 0, d
    r = run_folio("status", "--json", cwd=root, env=C_LOCALE)
    assert json.loads(r.stdout)["files"] == 3
    # UTF-8 arguments are read as UTF-8, and names print as they are.
    r = run_folio("query", "résumé", "--lexical", "-l", "1", cwd=root, env=C_LOCALE)
    assert r.returncode == 0, r.stderr
    assert "naïve/résumé.md:1-3" in r.stdout
    r = run_folio("show", "café.md:4-6", cwd=root, env=C_LOCALE)
    assert r.returncode == 0 and "The kettle in the café." in r.stdout, r.stderr
    r = run_folio("ls", "--where", "lieu=café", cwd=root, env=C_LOCALE)
    assert r.returncode == 0 and r.stdout.split() == ["café.md"], (r.stdout, r.stderr)


def test_an_ascii_only_output_stream_gets_escapes_not_a_traceback(tmp_path, fake_server):
    """PYTHONIOENCODING=ascii (an old CI runner, a pipe declared ASCII): a name or heading it cannot
    hold is written \\uXXXX, and --json stays JSON that reads back to the exact name."""
    srv = fake_server(dim=32)
    root = write_tree(tmp_path / "c", {"ünï.md": "# Café 😀\n\nThe kettle in the café.\n"})
    ascii_env = {**C_LOCALE, "PYTHONIOENCODING": "ascii"}
    r = run_folio("index", "--endpoint", srv.url, "--json", cwd=root, env=ascii_env)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    r = run_folio("query", "kettle café", "-l", "1", cwd=root, env=ascii_env)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert r.stdout.isascii() and "\\u00fcn\\u00ef.md:1-3" in r.stdout and "\\ud83d\\ude00" in r.stdout
    r = run_folio("query", "kettle café", "-l", "1", "--json", cwd=root, env=ascii_env)
    row = json.loads(r.stdout)["results"][0]
    assert (row["path"], row["trail"]) == ("ünï.md", ["Café 😀"])


def test_a_removed_working_directory_or_a_folio_yaml_that_is_no_file_is_one_sentence(tmp_path, fake_server):
    gone = tmp_path / "gone"
    gone.mkdir()
    for args in (["index"], ["query", "x"], ["status"]):
        # the shell stands in a directory removed under it
        r = subprocess.run(["sh", "-c", f'cd "{gone}" && rmdir "{gone}" && exec "$@"', "sh", *folio_command(), *args],
                           capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)
        gone.mkdir()
        assert r.returncode == 1, (args, r.stderr)
        assert r.stderr.startswith("folio: the current directory no longer exists") and "Traceback" not in r.stderr
    srv = fake_server(dim=32)
    for name, make in (("fifo", os.mkfifo), ("dir", os.mkdir), ("zero", lambda p: os.symlink("/dev/zero", p))):
        root = write_tree(tmp_path / name, {"a.md": "# A\n\nText.\n"})
        make(root / "folio.yaml")
        r = run_folio("index", "--endpoint", srv.url, cwd=root, timeout=60)
        assert r.returncode == 1 and "folio.yaml is not a file of settings" in r.stderr, (name, r.stderr)


def capped(*args, cwd, env=None, timeout=300) -> subprocess.CompletedProcess:
    """The CLI as run_folio runs it, under the address-space cap: a MemoryError instead of the machine."""
    full = {**os.environ, **(env or {})}
    if len(folio_command()) == 3:  # `python -m folio`
        full["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), full.get("PYTHONPATH")]))
    return subprocess.run([*folio_command(), *map(str, args)], cwd=cwd, env=full, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL,
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP)))


def test_frontmatter_aliases_cannot_expand_past_a_size(tmp_path, fake_server):
    """A 1 MB string named 5,000 times through a YAML alias (5 GB of JSON once expanded), and empty
    lists nested through aliases (a billion visits): the file is indexed without its frontmatter,
    saying why, within the cap; a large value written out, or named once more, is kept."""
    srv = fake_server(dim=32)
    big = "x" * 1_000_000
    laughs = ["a0: &a0 []"] + [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 10)]
    root = write_tree(tmp_path / "c", {
        "bomb.md": f'---\nbig: &a "{big}"\nmany: [' + ", ".join(["*a"] * 5000) + "]\n---\n# Bomb\n\nA kettle.\n",
        "laughs.md": "---\n" + "\n".join(laughs) + "\n---\n# Laughs\n\nA teapot.\n",
        "twice.md": f'---\nkind: &k "{big}"\nagain: *k\nsmall: 1\n---\n# Twice\n\nA lighthouse.\n',
    })
    r = capped("index", "--endpoint", srv.url, cwd=root, timeout=120)  # seconds: before, minutes and a MemoryError
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Traceback" not in r.stderr and "MemoryError" not in r.stderr
    warnings = sorted(ln for ln in r.stderr.splitlines() if ln.startswith("warning: "))
    assert len(warnings) == 2, r.stderr
    assert warnings[0].startswith("warning: bomb.md: line 2: YAML frontmatter expands to more than ")
    assert "characters of keys and values" in warnings[0] and warnings[0].endswith("indexed without frontmatter")
    assert warnings[1] == ("warning: laughs.md: line 2: YAML frontmatter expands to more than 10,000 values past "
                           "those it writes out (its aliases repeat them); indexed without frontmatter")
    r = capped("ls", "--where", "small=1", cwd=root)
    assert r.stdout.split() == ["twice.md"], r.stderr
    r = capped("query", "kettle", "--lexical", "--json", "-l", "1", cwd=root)
    assert r.returncode == 0 and json.loads(r.stdout)["results"][0]["path"] == "bomb.md", r.stderr[-2000:]


def test_frontmatter_written_out_in_full_is_kept_and_merge_keys_merge(tmp_path, fake_server):
    """10,001 keys written out were dropped as if aliases had expanded them; `<<: *base` was kept as a
    key of its own (`d.<<.j`), where YAML readers merge the base's keys under the mapping."""
    srv = fake_server(dim=32)
    root = write_tree(tmp_path / "c", {
        "many.md": "---\n" + "".join(f"k{i}: v{i}\n" for i in range(10_001)) + "---\n# Many\n\nA kettle.\n",
        "merge.md": "---\nbase: &b {k: 1, j: 2}\nd:\n  <<: *b\n  k: 3\n---\n# Merge\n\nA teapot.\n",
    })
    r = run_folio("index", "--endpoint", srv.url, cwd=root)
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
    assert run_folio("ls", "--where", "k10000=v10000", cwd=root).stdout.split() == ["many.md"]
    assert run_folio("ls", "--where", "d.j=2", "--where", "d.k=3", cwd=root).stdout.split() == ["merge.md"]


def test_a_long_heading_is_cut_where_it_is_repeated(tmp_path, fake_server):
    """A 1 MB heading over 200 subsections was copied into each one's trail (a MemoryError in the
    lexical segment build; at 100 KB, an index of 21 MB and a one-row answer of 205 KB): it is cut
    to a bounded length wherever it is repeated, said once, and the file's text keeps it whole."""
    srv = fake_server(dim=32)
    heading = " ".join(f"word{i}" for i in range(120_000))  # ~1 MB
    subs = "".join(f"## Sub {i}\n\nnotes on kettle number {i}\n\n" for i in range(200))
    root = write_tree(tmp_path / "c", {"long.md": f"# {heading}\n\n{subs}", "plain.md": "# Plain\n\nA teapot.\n"})
    r = capped("index", "--endpoint", srv.url, cwd=root, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    [warning] = [ln for ln in r.stderr.splitlines() if ln.startswith("warning: ")]
    assert warning.startswith(f"warning: long.md: line 1: a heading of {len(heading):,} characters is cut to ")
    assert (root / ".folio" / "index.db").stat().st_size < 2_000_000
    r = capped("query", "kettle number 17", "--lexical", "--json", "-l", "1", cwd=root)
    assert r.returncode == 0, r.stderr[-2000:]
    assert len(r.stdout) < 5000, len(r.stdout)
    [row] = json.loads(r.stdout)["results"]
    assert (row["path"], row["start"]) == ("long.md", 3 + 4 * 17)
    top, own = row["trail"]
    assert own == "Sub 17" and top.startswith("word0 word1 ") and top.endswith("…") and len(top) <= 300
    r = capped("show", "long.md:1-1", cwd=root)  # the heading's own line, whole
    assert r.returncode == 0 and heading in r.stdout, r.stderr[-2000:]


def test_a_long_pointer_costs_what_its_length_does(tmp_path):
    """`--exclude-pointed-by KEY --identity @path` with a 180 KB pointer: its tails were all kept
    (quadratic: a MemoryError, 29 s and 3.5 GB at 120 KB); the same documents are dropped, at once."""
    long = "x/" * 90_000 + "docs/old.md"
    root = write_tree(tmp_path / "c", {
        "docs/old.md": "# Old\n\nThe old kettle.\n",
        "docs/other.md": "# Other\n\nAnother kettle.\n",
        "new.md": f"---\nreplaces: [{long}, ./docs/gone.md]\n---\n# New\n\nThe new kettle.\n",
        "deep/a/b/c/d/e.md": "---\nreplaces: docs/other\n---\n# Deep\n\nA deep kettle.\n",
    })
    r = capped("index", "--endpoint", "http://127.0.0.1:9/v1/embeddings", cwd=root, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    r = capped("ls", "--exclude-pointed-by", "replaces", "--identity", "@path", cwd=root, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["deep/a/b/c/d/e.md", "new.md"]
    r = capped("query", "kettle", "--lexical", "--json", "--exclude-pointed-by", "replaces", "--identity", "@path",
               cwd=root, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    assert sorted(h["path"] for h in json.loads(r.stdout)["results"]) == ["deep/a/b/c/d/e.md", "new.md"]


def test_a_query_during_a_rebuild_is_never_called_damage(tmp_path, fake_server):
    """Queries (the CLI in a loop, and one `folio mcp` kept open) while another process runs `folio
    index --rebuild`, round after round: each answers from the index that is there (the old one, or
    what the rebuild has committed) or says a rebuild is under way; none calls the index damaged or
    asks for another rebuild (3 rounds in 5 did)."""
    import subprocess as sp
    import threading

    import anyio
    import pytest

    mcp_client = pytest.importorskip("mcp.client")
    from mcp.client.stdio import StdioServerParameters

    srv = fake_server(dim=32)
    root = write_tree(tmp_path / "c", {
        f"d{i:03}.md": f"# Doc {i}\n\n" + "\n\n".join(f"## Part {j}\n\nnotes on topic{i} and kettle{j}"
                                                      for j in range(10)) + "\n"
        for i in range(150)})
    r = run_folio("index", "--endpoint", srv.url, cwd=root)
    assert r.returncode == 0, r.stderr
    bad = ("damaged", "--rebuild", "Traceback")
    wrong: list[str] = []
    asked = {"cli": 0, "mcp": 0}
    done = threading.Event()

    def cli_queries() -> None:
        while not done.is_set():
            r = run_folio("query", "topic7 kettle3", "--json", "-l", "1", cwd=root)
            asked["cli"] += 1
            if any(b in r.stderr for b in bad) or (r.returncode and "while this query read it" not in r.stderr):
                wrong.append(f"query: exit {r.returncode}: {r.stderr}")

    async def main() -> None:
        cmd = folio_command()
        params = StdioServerParameters(command=cmd[0], args=[*cmd[1:], "mcp"], cwd=str(root), env=dict(os.environ))
        async with mcp_client.Client(params, read_timeout_seconds=120) as client:
            for _ in range(8):
                rebuild = sp.Popen([*cmd, "index", "--rebuild", "--endpoint", srv.url], cwd=root,
                                   stdout=sp.DEVNULL, stderr=sp.PIPE, text=True)
                while rebuild.poll() is None:
                    got = await client.call_tool("query", {"query": "topic7 kettle3", "limit": 1})
                    asked["mcp"] += 1
                    text = "\n".join(c.text for c in got.content if getattr(c, "text", None) is not None)
                    if any(b in text for b in bad[:2]) or (got.is_error and "while this query read it" not in text):
                        wrong.append(f"mcp: {text}")
                assert rebuild.wait() == 0, rebuild.stderr.read()
            got = await client.call_tool("query", {"query": "topic7 kettle3", "limit": 1})
            assert got.structured_content["results"][0]["path"] == "d007.md"

    loop = threading.Thread(target=cli_queries)
    loop.start()
    try:
        anyio.run(main)
    finally:
        done.set()
        loop.join()
    assert not wrong, wrong
    assert asked["cli"] >= 8 and asked["mcp"] >= 8, asked  # the queries did run while the rebuilds did


def test_config_set_into_an_unwritable_place_is_one_sentence(tmp_path):
    """`folio config set` where its file cannot be written: a read-only XDG_CONFIG_HOME, a config path
    through a file, a config file that is a directory, `--project` on a read-only corpus. One sentence
    naming the file, why and the fix; nothing half-written left behind."""
    from test_hostile_index import read_only

    def one_sentence(r, path) -> str:
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
        [line] = r.stderr.strip().splitlines()
        assert line.startswith("folio: `timeout` was not set: cannot write ") and str(path) in line, line
        return line

    blocker = tmp_path / "file"
    blocker.write_text("not a directory\n")
    r = run_folio("config", "set", "timeout", "30", cwd=tmp_path, env={"XDG_CONFIG_HOME": blocker})
    line = one_sentence(r, blocker / "folio" / "config.yaml")
    assert f"({blocker} is a file, not a directory)" in line and "FOLIO_TIMEOUT" in line
    dirs = tmp_path / "dirs"
    (dirs / "folio" / "config.yaml").mkdir(parents=True)
    r = run_folio("config", "set", "timeout", "30", cwd=tmp_path, env={"XDG_CONFIG_HOME": dirs})
    assert "config.yaml is a directory)" in one_sentence(r, dirs / "folio" / "config.yaml")
    assert os.listdir(dirs / "folio") == ["config.yaml"]  # no config.yaml.tmp left
    home, corpus = tmp_path / "home", tmp_path / "corpus"
    (home / "folio").mkdir(parents=True)
    corpus.mkdir()
    with read_only(tmp_path, home, corpus) as run:
        r = run("config", "set", "timeout", "30", cwd=corpus, env={"XDG_CONFIG_HOME": home})
        line = one_sentence(r, home / "folio" / "config.yaml")
        assert "(read-only file system)" in line or "(permission denied)" in line, line
        r = run("config", "set", "--project", "timeout", "30", cwd=corpus, env={"XDG_CONFIG_HOME": tmp_path / "w"})
        line = one_sentence(r, corpus / "folio.yaml")
        assert "without --project" in line, line
    r = run_folio("config", "set", "timeout", "30", cwd=tmp_path, env={"XDG_CONFIG_HOME": tmp_path / "ok"})
    assert r.returncode == 0 and "timeout" in (tmp_path / "ok" / "folio" / "config.yaml").read_text(), r.stderr


def test_an_mcp_index_call_ends_when_its_client_leaves(tmp_path, fake_server):
    """`folio mcp` asked to index a corpus whose server is slow, then its client closes stdin (it has
    left): the call is cancelled and the process exits within seconds, keeping what the run committed;
    before, the run went on to the end for nobody. The next `folio index` finishes the job."""
    import subprocess as sp
    import time

    srv = fake_server(dim=32, delay_ms=400)
    root = write_tree(tmp_path / "c", {f"d{i:03}.md": f"# Doc {i}\n\nnotes on topic{i}\n" for i in range(800)})
    (root / "folio.yaml").write_text(f"endpoint: {srv.url}\nbatch_size: 8\n")
    proc = sp.Popen([*folio_command(), "mcp"], cwd=root, stdin=sp.PIPE, stdout=sp.PIPE, stderr=sp.PIPE)
    try:
        for msg in ({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}},
                    {"jsonrpc": "2.0", "method": "notifications/initialized"},
                    {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "index", "arguments": {}}}):
            proc.stdin.write((json.dumps(msg) + "\n").encode())
            proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 1
        t, seen = time.monotonic(), 0
        while not seen and time.monotonic() - t < 120:  # until the run has committed some of its vectors
            time.sleep(0.2)
            r = run_folio("status", "--json", cwd=root)
            seen = json.loads(r.stdout)["embedded"] if r.returncode == 0 else 0
        assert 0 < seen < 800, seen
        proc.stdin.close()  # the client leaves
        left = time.monotonic()
        rc = proc.wait(timeout=60)
        took = time.monotonic() - left
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = proc.stderr.read().decode()
    assert rc == 0 and "Traceback" not in err, err
    assert took < 5, took  # the whole run would take ~40 s more
    requests = srv.stats()["requests"]
    time.sleep(2)
    assert srv.stats()["requests"] == requests  # nothing is sent for it any more
    r = run_folio("status", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    kept = json.loads(r.stdout)
    assert seen <= kept["embedded"] < 800, kept  # what it committed is kept
    srv.control(delay_ms=0)
    r = run_folio("index", "--json", cwd=root)
    assert r.returncode == 0 and json.loads(r.stdout)["embedded"] == 800 - kept["embedded"], r.stderr


def test_an_endpoint_named_for_a_corpus_without_sections_is_recorded(tmp_path, fake_server):
    """`folio index --endpoint URL` where no file holds a section yet: the server is asked and its space
    recorded, so status names it and the next plain `folio index` and queries use it (they went to
    the default port, and status said no server had answered)."""
    srv = fake_server(dim=32)
    root = write_tree(tmp_path / "c", {"only.md": "---\ntitle: Only frontmatter\n---\n", "empty.md": ""})
    r = run_folio("index", "--endpoint", srv.url, cwd=root)
    assert r.returncode == 0, r.stderr
    s = json.loads(run_folio("status", "--json", cwd=root).stdout)
    assert (s["endpoint"], s["dim"], s["sections"]) == (srv.url, 32, 0), s
    (root / "new.md").write_text("# New\n\nThe lighthouse keeper's kettle.\n")
    r = run_folio("index", "--json", cwd=root)
    assert r.returncode == 0 and json.loads(r.stdout)["embedded"] == 1, r.stderr
    r = run_folio("query", "kettle", "--json", cwd=root)
    d = json.loads(r.stdout)
    assert d["mode"] == "hybrid" and d["results"][0]["path"] == "new.md" and not d["notices"], d


def test_a_fifo_named_md_is_named_and_skipped(tmp_path, fake_server):
    """A FIFO named `*.md` is skipped with a warning naming it (it was skipped silently)."""
    srv = fake_server(dim=32)
    root = write_tree(tmp_path / "c", {"plain.md": "# Plain\n\nA kettle.\n"})
    os.mkfifo(root / "pipe.md")
    r = run_folio("index", "--endpoint", srv.url, cwd=root, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines() == ["warning: pipe.md: a FIFO (named pipe), not a regular file; skipped"]
    assert "indexed 1 file," in r.stdout


def test_a_file_skipped_as_binary_is_not_listed(tmp_path, fake_server):
    """A file skipped as binary holds no sections: `folio ls` does not list it (it did), while a
    document of frontmatter only is still listed."""
    srv = fake_server(dim=32)
    root = write_tree(tmp_path / "c", {
        "plain.md": "# Plain\n\nA kettle.\n", "meta.md": "---\nstatus: draft\n---\n",
        "blob.md": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe\x00",
    })
    r = run_folio("index", "--endpoint", srv.url, cwd=root)
    assert r.returncode == 0, r.stderr
    assert any(ln.startswith("warning: blob.md: ") and "binary" in ln for ln in r.stderr.splitlines()), r.stderr
    r = run_folio("ls", cwd=root)
    assert r.returncode == 0 and r.stdout.split() == ["meta.md", "plain.md"], (r.stdout, r.stderr)
    r = run_folio("ls", "--json", cwd=root)
    assert [d["path"] for d in json.loads(r.stdout)["documents"]] == ["meta.md", "plain.md"]
