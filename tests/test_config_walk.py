"""Settings precedence with provenance, the API-key policy, and the corpus walk."""

from __future__ import annotations

import json
import os
import signal
import threading

import pytest

from folio import config, space
from folio.errors import FolioError
from folio.readahead import WalkAhead
from folio.walk import walk


def user_config(home, text):
    p = home / ".config" / "folio" / "config.yaml"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def test_precedence_flag_env_project_user_default(tmp_path, monkeypatch, _isolate_env):
    home = _isolate_env
    root = tmp_path / "c"
    root.mkdir()
    s = config.resolve(root)
    assert (s["endpoint"], s.source("endpoint")) == (config.DEFAULT_ENDPOINT, "default")
    user_config(home, "endpoint: http://user:1/v1/embeddings\nmodel: u\n")
    assert config.resolve(root).source("endpoint") == "user config"
    (root / "folio.yaml").write_text("endpoint: http://proj:1/v1/embeddings\n")
    s = config.resolve(root)
    assert (s["endpoint"], s.source("endpoint")) == ("http://proj:1/v1/embeddings", "folio.yaml")
    assert (s["model"], s.source("model")) == ("u", "user config")
    monkeypatch.setenv("FOLIO_ENDPOINT", "http://env:1/v1/embeddings")
    assert config.resolve(root).source("endpoint") == "env FOLIO_ENDPOINT"
    s = config.resolve(root, {"endpoint": "http://flag:1/v1/embeddings"})
    assert (s["endpoint"], s.source("endpoint")) == ("http://flag:1/v1/embeddings", "flag")


def test_api_key_is_refused_in_folio_yaml(tmp_path, run_folio):
    (tmp_path / "folio.yaml").write_text("api_key: sk-abc\n")
    r = run_folio("config", cwd=tmp_path)
    assert r.returncode == 1 and "must not be in folio.yaml" in r.stderr and "sk-abc" not in r.stderr
    (tmp_path / "folio.yaml").unlink()
    r = run_folio("config", "set", "--project", "api_key", "sk-abc", cwd=tmp_path)
    assert r.returncode == 2 and "cannot go in folio.yaml" in r.stderr
    assert not (tmp_path / "folio.yaml").exists()


def test_config_set_and_show_with_sources_and_both_paths(tmp_path, run_folio, _isolate_env):
    r = run_folio("config", "set", "endpoint", "http://127.0.0.1:9999/v1/embeddings", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = run_folio("config", "set", "--project", "model", "bge-m3", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "model: bge-m3" in (tmp_path / "folio.yaml").read_text()
    data = json.loads(run_folio("config", "--json", cwd=tmp_path).stdout)
    assert data["settings"]["endpoint"] == {"value": "http://127.0.0.1:9999/v1/embeddings", "source": "user config"}
    assert data["settings"]["model"] == {"value": "bge-m3", "source": "folio.yaml"}
    assert data["user_file"].endswith("folio/config.yaml") and data["project_file"].endswith("folio.yaml")
    text = run_folio("config", cwd=tmp_path).stdout
    assert "(user config)" in text and "(folio.yaml)" in text and str(_isolate_env) in text


def test_config_set_says_when_another_source_still_decides_here(tmp_path, run_folio, _isolate_env):
    (tmp_path / "folio.yaml").write_text("endpoint: http://127.0.0.1:9000/v1/embeddings\n")
    r = run_folio("config", "set", "endpoint", "http://127.0.0.1:9999/v1/embeddings", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert f"here endpoint still comes from {tmp_path / 'folio.yaml'}" in r.stderr, r.stderr
    assert "folio config set --project endpoint" in r.stderr
    r = run_folio("config", "set", "--project", "mode", "lexical", cwd=tmp_path, env={"FOLIO_MODE": "semantic"})
    assert r.returncode == 0 and "here mode still comes from env FOLIO_MODE" in r.stderr, r.stderr
    assert "unset FOLIO_MODE" in r.stderr
    r = run_folio("config", "set", "--project", "endpoint", "http://127.0.0.1:9999/v1/embeddings", cwd=tmp_path)
    assert r.returncode == 0 and "note:" not in r.stderr, r.stderr  # the value written is the one in force


@pytest.mark.parametrize("line, model", [
    ("model: nomic-embed-text:latest  # pulled today", "nomic-embed-text:latest"),  # plain: read without yaml
    ("model: hf.co/org/name@main", "hf.co/org/name@main"),
    ("model: yes", "True"), ("model: Off", "False"), ("model: 0x10", "16"), ("model: 012", "10"),  # YAML 1.1 says so
    ("model: 1.5", "1.5"), ("model: 'quoted # not a comment'", "quoted # not a comment"),
    ("model: two\n  lines", "two lines"),
])
def test_folio_yaml_values_are_what_yaml_makes_of_them(tmp_path, run_folio, _isolate_env, line, model):
    # Plain `key: value` lines are read without importing yaml (a no-op re-index pays for every
    # import); anything YAML could read otherwise goes to yaml, so no file means two things.
    import yaml

    (tmp_path / "folio.yaml").write_text(f"# settings\n\n{line}\nmax_chars: 1200\n")
    assert config._load_yaml(tmp_path / "folio.yaml") == yaml.safe_load((tmp_path / "folio.yaml").read_text())
    data = json.loads(run_folio("config", "--json", cwd=tmp_path).stdout)["settings"]
    assert data["model"] == {"value": model, "source": "folio.yaml"}
    assert data["max_chars"] == {"value": 1200, "source": "folio.yaml"}


def test_a_folio_yaml_that_is_not_yaml_is_still_refused_with_its_line(tmp_path, run_folio, _isolate_env):
    (tmp_path / "folio.yaml").write_text("model: fine\nendpoint: a: b\n")
    r = run_folio("config", cwd=tmp_path)
    assert r.returncode == 1 and "folio.yaml line 2: not valid YAML" in r.stderr, r.stderr


def test_an_endpoint_without_a_scheme_is_refused_with_the_url_meant(tmp_path, run_folio, _isolate_env):
    r = run_folio("config", "set", "endpoint", "localhost:8080", cwd=tmp_path)
    assert r.returncode == 2 and "did you mean http://localhost:8080/v1/embeddings?" in r.stderr
    assert not (_isolate_env / ".config" / "folio" / "config.yaml").exists()  # nothing written
    (tmp_path / "a.md").write_text("# A\n\ntext\n")
    r = run_folio("index", "--endpoint", "127.0.0.1:8080/v1/embeddings", cwd=tmp_path)
    assert r.returncode == 2 and "did you mean http://127.0.0.1:8080/v1/embeddings?" in r.stderr
    assert not (tmp_path / ".folio").exists()
    (tmp_path / "folio.yaml").write_text("endpoint: localhost:8080\n")
    r = run_folio("index", cwd=tmp_path)
    assert r.returncode == 1 and str(tmp_path / "folio.yaml") in r.stderr and "not an http(s) URL" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("url", ["http://[::1", "http://[::1]:8080x/v1/embeddings", "http://127.0.0.1:99999/v1"])
def test_an_endpoint_that_is_not_a_valid_url_is_one_sentence_wherever_it_is_named(tmp_path, run_folio,
                                                                                   _isolate_env, url):
    (tmp_path / "a.md").write_text("# A\n\ntext\n")
    for args, env, code, where in ((["index", "--endpoint", url], {}, 2, "--endpoint"),
                                   (["index"], {"FOLIO_ENDPOINT": url}, 1, "FOLIO_ENDPOINT"),
                                   (["config", "set", "endpoint", url], {}, 2, "folio config set"),
                                   (["doctor", "--endpoint", url], {}, 2, "--endpoint")):
        r = run_folio(*args, cwd=tmp_path, env=env)
        assert r.returncode == code and "Traceback" not in r.stderr, (args, r.stderr)
        assert r.stderr.startswith(f"folio: {where}: endpoint {url!r} is not a valid URL ("), r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "http://[::1]:8080/" in r.stderr
    assert not (tmp_path / ".folio").exists() and not (_isolate_env / ".config" / "folio" / "config.yaml").exists()
    (tmp_path / "folio.yaml").write_text(f"endpoint: '{url}'\n")
    r = run_folio("index", cwd=tmp_path)
    assert r.returncode == 1 and r.stderr.startswith(f"folio: {tmp_path / 'folio.yaml'} line 1: endpoint {url!r} is not"), \
        r.stderr


def test_a_budget_flag_below_the_floor_is_a_usage_error(tmp_path, run_folio):
    (tmp_path / "a.md").write_text("# A\n\ntext\n")
    r = run_folio("index", "--max-chars", "100", cwd=tmp_path)
    assert r.returncode == 2 and "at least 200" in r.stderr


BOUNDS = {"jobs": ("--jobs", "100000", 64), "max_chars": ("--max-chars", "99999999999999999999", 1_000_000),
          "timeout": ("FOLIO_TIMEOUT", "99999999999999999999", 3600), "batch_size": (None, "1000000", 4096)}


@pytest.mark.parametrize(("key", "how"), [(k, h) for k, (where, _v, _m) in BOUNDS.items()
                                          for h in ("config set", "folio.yaml") + ((where,) if where else ())])
def test_a_number_past_its_bound_is_refused_in_one_sentence_wherever_it_is_set(tmp_path, run_folio, key, how):
    """`--jobs 100000` or `--max-chars 99999999999999999999` is a slip: refused with the bound and why,
    never taken silently (issue 30); typed on the command line it is a usage error (exit 2)."""
    _where, value, most = BOUNDS[key]
    (tmp_path / "a.md").write_text("# A\n\ntext\n")
    endpoint = "http://127.0.0.1:9/v1/embeddings"
    if how.startswith("--"):
        r, code = run_folio("index", "--endpoint", endpoint, how, value, cwd=tmp_path), 2
    elif how == "config set":
        r, code = run_folio("config", "set", key, value, cwd=tmp_path), 2
    elif how == "folio.yaml":
        (tmp_path / "folio.yaml").write_text(f"{key}: {value}\n")
        r, code = run_folio("index", "--endpoint", endpoint, cwd=tmp_path), 1
    else:
        r, code = run_folio("index", "--endpoint", endpoint, cwd=tmp_path, env={how: value}), 1
    assert r.returncode == code, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and f"`{key}` is too large ({value}); it must be at most {most} (" in lines[0], r.stderr
    assert not (tmp_path / ".folio").exists()  # refused before anything is written
    # the bound itself is taken
    (tmp_path / "folio.yaml").write_text(f"{key}: {most}\n")
    r = run_folio("config", cwd=tmp_path)
    assert r.returncode == 0 and str(most) in r.stdout, r.stderr


def test_api_key_is_shown_only_as_set(tmp_path, run_folio):
    r = run_folio("config", cwd=tmp_path, env={"FOLIO_API_KEY": "sk-very-secret"})
    assert "sk-very-secret" not in r.stdout + r.stderr and "(set)" in r.stdout


def test_key_policy(tmp_path, monkeypatch, _isolate_env):
    monkeypatch.setenv("FOLIO_API_KEY", "k")
    s = config.resolve(tmp_path)
    assert space.key_policy("https://api.example/v1/embeddings", "user config", s).send
    assert space.key_policy("http://127.0.0.1:8080/v1/embeddings", "user config", s).send
    # folio.yaml never picks where the key goes, not even a port on this machine (DESIGN §1)
    assert not space.key_policy("http://127.0.0.1:8080/v1/embeddings", "folio.yaml", s).send
    d = space.key_policy("https://evil.example/v1/embeddings", "folio.yaml", s)
    assert d.configured and not d.send and "key_hosts" in d.reason
    d = space.key_policy("http://10.0.0.5/v1/embeddings", "env FOLIO_ENDPOINT", s)
    assert not d.send and "plain http" in d.reason
    user_config(_isolate_env, "key_hosts: [evil.example]\nallow_insecure_key: true\n")
    s = config.resolve(tmp_path)
    assert space.key_policy("https://evil.example/v1/embeddings", "folio.yaml", s).send
    assert space.key_policy("http://10.0.0.5/v1/embeddings", "flag", s).send


def test_invalid_settings_are_one_sentence(tmp_path):
    (tmp_path / "folio.yaml").write_text("max_chars: lots\n")
    with pytest.raises(FolioError, match="whole number"):
        config.resolve(tmp_path)
    (tmp_path / "folio.yaml").write_text("endpoint: [unclosed\n")
    with pytest.raises(FolioError, match="line"):
        config.resolve(tmp_path)
    (tmp_path / "folio.yaml").write_text("!!python/object/apply:os.system ['echo pwned']\n")
    with pytest.raises(FolioError):
        config.resolve(tmp_path)


def test_find_root_walks_up(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "folio.yaml").write_text("model: x\n")
    assert config.find_root(tmp_path / "a" / "b") == tmp_path.resolve()


def test_walk_skips_hidden_honours_ignores_and_sorts(tmp_path):
    files = {
        "b.md": "x", "a.md": "x", "A.MD": "x", "notes.txt": "x", ".hidden.md": "x", ".git/x.md": "x",
        ".folio/y.md": "x", "build/out.md": "x", "sub/keep.md": "x", "sub/skip.md": "x", "sub/deep/z.md": "x",
        "drafts/d.md": "x",
    }
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    (tmp_path / ".gitignore").write_text("build/\n")
    (tmp_path / "sub" / ".ignore").write_text("skip.md\n")
    entries, warnings = walk(tmp_path, exclude=["drafts/"])
    assert [e.path for e in entries] == ["A.MD", "a.md", "b.md", "sub/deep/z.md", "sub/keep.md"]
    assert warnings == []
    entries, _ = walk(tmp_path, extensions=[".txt"])
    assert [e.path for e in entries] == ["notes.txt"]


def test_the_walk_in_a_child_gives_what_the_walk_gives_and_survives_losing_the_child(tmp_path):
    """`folio index` lists the tree in a forked child while it opens the store; whatever becomes of
    the child, the run gets exactly the walk's entries (in the order listed: the run sorts what it
    reads) and warnings."""

    def walked(ahead):
        entries, warnings = ahead.result()
        return sorted(entries), warnings

    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / ".ignore").write_text("skip.md\n")
    for rel in ("a.md", "sub/keep.md", "sub/skip.md", "x\N{SNOWMAN}.md"):
        (tmp_path / rel).write_text("# T\n")
    os.symlink(tmp_path.parent, tmp_path / "out")  # a warning the walk gives
    expected = walk(tmp_path)
    assert expected[1] and len(expected[0]) == 3
    assert walked(WalkAhead(tmp_path)) == expected
    killed = WalkAhead(tmp_path)
    if killed.pid is not None:
        os.kill(killed.pid, 9)  # lost before it answered: the walk runs again in this process
    assert walked(killed) == expected
    unwanted = WalkAhead(tmp_path)
    unwanted.close()  # a run that failed before it needed the listing leaves no child behind
    assert unwanted.pid is None
    # from a process with other threads (folio mcp) nothing is forked: the walk runs here
    import threading

    hold = threading.Event()
    t = threading.Thread(target=hold.wait)
    t.start()
    try:
        threaded = WalkAhead(tmp_path)
        assert threaded.pid is None and walked(threaded) == expected
    finally:
        hold.set()
        t.join()


def test_a_walk_shared_between_the_run_and_its_child_lists_what_one_walk_lists(tmp_path):
    """The run lists part of the tree itself while it waits for its walking child (the child hands
    it directories it has not reached): whichever side meets them, ignore files, symlinked
    directories into the other side's part, files named twice and links out of the corpus give
    exactly the entries and warnings of one walk."""
    root = tmp_path / "root"
    for i in range(24):
        for j in range(6):
            d = root / f"t{i:02d}" / f"s{j}"
            d.mkdir(parents=True)
            (d / "a.md").write_text("# A\n")
            (d / "skip.md").write_text("# S\n")
        (root / f"t{i:02d}" / ".ignore").write_text("skip.md\n")
        os.symlink(root / f"t{(i + 12) % 24:02d}" / "s0", root / f"t{i:02d}" / "other")  # across the tree
        os.symlink(root / f"t{(i + 7) % 24:02d}" / "s1" / "a.md", root / f"t{i:02d}" / "twice.md")
    (root / "hidden-only").mkdir()
    os.symlink(tmp_path, root / "t03" / "s2" / "out")  # outside the corpus: a warning, on either side
    expected_entries, expected_warnings = walk(root)
    assert expected_warnings and all("skip.md" not in e.path for e in expected_entries)
    shared = 0
    for held in (False, True, True):
        ahead = WalkAhead(root)
        assert ahead.pid is not None, ("no walking child: this process has threads (folio forks only from a "
                                       f"single thread), left by an earlier test: {threading.enumerate()}")
        if held:  # the child stopped as it starts, so that the run asks it for work before it lists it all
            os.kill(ahead.pid, signal.SIGSTOP)  # (alone, on a busy machine, it sometimes did every time)
            threading.Timer(0.3, os.kill, (ahead.pid, signal.SIGCONT)).start()
        entries, warnings = ahead.result()
        assert sorted(entries) == [tuple(e) for e in expected_entries]
        assert sorted(warnings) == sorted(expected_warnings)
        shared += ahead.mine is not None and len(ahead.mine.entries) > 0
    assert shared  # the run did list part of the tree (else this test shows nothing)


def test_walk_lists_a_symlinked_file_once_under_its_own_path(tmp_path, run_folio):
    root = tmp_path / "root"
    (root / "pkg").mkdir(parents=True)
    (root / "zz-docs").mkdir()
    (root / "SKILL.md").write_text("# Skill\n\nHow an agent drives the tool.\n")
    (root / "zz-docs" / "guide.md").write_text("# Guide\n\nRead me.\n")
    (root / ".hidden").mkdir()
    (root / ".hidden" / "only.md").write_text("# Only\n\nReachable through a link alone.\n")
    os.symlink("../SKILL.md", root / "pkg" / "SKILL.md")      # a second name for a listed file
    os.symlink(root / "zz-docs", root / "a-current")          # a second way into a listed directory
    os.symlink(root / ".hidden" / "only.md", root / "only.md")  # the only way to its target
    entries, warnings = walk(root)
    assert [e.path for e in entries] == ["SKILL.md", "only.md", "zz-docs/guide.md"]
    assert not warnings
    r = run_folio("index", "--endpoint", "http://127.0.0.1:9/v1/embeddings", cwd=root)
    assert r.returncode == 0, r.stderr
    hits = run_folio("query", "how an agent drives the tool", "--lexical", "--paths-only", cwd=root).stdout.split()
    assert hits == ["SKILL.md:1-3"]  # once, under its own path


def test_walk_never_follows_symlinks_out_of_the_root_or_into_loops(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("secret")
    root = tmp_path / "root"
    (root / "d").mkdir(parents=True)
    (root / "d" / "in.md").write_text("x")
    os.symlink(outside, root / "out")
    os.symlink(outside / "secret.md", root / "s.md")
    os.symlink(root / "d", root / "d" / "loop")
    os.symlink(root, root / "d" / "up")
    entries, warnings = walk(root)
    assert [e.path for e in entries] == ["d/in.md"]
    assert any("outside the corpus" in w for w in warnings)


IGNORE_TREES = {
    "whitelist": {".gitignore": "*\n!*/\n!*.md\n", "a.md": "# a\n", "sub/b.md": "# b\n", "sub/c.txt": "c\n"},
    "nested negation": {".gitignore": "sub/*.md\n", "sub/.gitignore": "!keep.md\n", "a.md": "# a\n",
                        "sub/keep.md": "# k\n", "sub/other.md": "# o\n"},
    "excluded directory": {".gitignore": "build/\n!build/keep.md\n", "build/keep.md": "# k\n", "top.md": "# t\n"},
    "deeper wins": {".gitignore": "!notes.md\n", "d/.gitignore": "notes.md\n", "notes.md": "# n\n",
                    "d/notes.md": "# dn\n", "d/e/notes.md": "# en\n"},
}


@pytest.mark.parametrize("name", list(IGNORE_TREES))
def test_ignore_files_leave_out_what_git_leaves_out(tmp_path, write_tree, run_folio, name):
    """`folio ls` after `folio index` lists the Markdown files git would track: the last pattern of
    a file decides, a deeper directory's file wins over its parents', and nothing under an excluded
    directory comes back. git itself is the reference."""
    import shutil
    import subprocess

    git = shutil.which("git")
    if git is None:
        pytest.skip("no git to compare with")
    root = write_tree(tmp_path / "c", IGNORE_TREES[name])
    subprocess.run([git, "init", "-q", str(root)], check=True)
    tracked = subprocess.run([git, "ls-files", "--others", "--exclude-standard", "--", "*.md"], cwd=root,
                             capture_output=True, text=True, check=True).stdout.split()
    r = run_folio("index", cwd=root, env={"FOLIO_ENDPOINT": "http://127.0.0.1:9/v1/embeddings"})
    assert r.returncode == 0, r.stderr
    assert run_folio("ls", cwd=root).stdout.split() == sorted(tracked)


def test_an_ignore_file_that_is_a_fifo_a_device_link_or_huge_is_passed_by_with_a_warning(tmp_path, write_tree,
                                                                                         run_folio):
    """A FIFO blocked the walk for ever, a link to /dev/zero filled memory: as git does, an ignore
    file is not followed through a symlink, and only a regular one is read (its first MB)."""
    root = write_tree(tmp_path / "c", {"a.md": "# a\n", "p/x.md": "# x\n", "z/y.md": "# y\n", "big/w.md": "# w\n"})
    os.mkfifo(root / "p" / ".gitignore")
    os.symlink("/dev/zero", root / "z" / ".gitignore")
    (root / "big" / ".ignore").write_bytes(b"w.md\n" + b"#" * (2 << 20) + b"\n")
    r = run_folio("index", cwd=root, env={"FOLIO_ENDPOINT": "http://127.0.0.1:9/v1/embeddings"}, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "p/.gitignore: a FIFO (named pipe), not a regular file" in r.stderr
    assert "z/.gitignore: a symlink; ignore files are not followed" in r.stderr
    assert "big/.ignore: longer than 1 MB" in r.stderr
    assert run_folio("ls", cwd=root).stdout.split() == ["a.md", "p/x.md", "z/y.md"]  # big/w.md: its first line applies
    assert "Traceback" not in r.stderr


def test_a_directory_that_can_be_listed_but_not_entered_names_its_files(tmp_path, write_tree, fake_server):
    """Mode 644 on a directory: its names can be read, its files not. They were left out without a
    word; each is named with the fix. (Run as an unprivileged user: root reads it anyway.)"""
    import shutil
    import subprocess

    from helpers import REPO, folio_command

    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "-U", "true"], capture_output=True).returncode != 0:
        pytest.skip("no unprivileged user namespace to run folio as another user")
    srv = fake_server()
    root = write_tree(tmp_path / "c", {"a.md": "# A\n", "d/b.md": "# B\n"})
    os.chmod(root / "d", 0o644)
    os.chmod(root, 0o777)
    os.chmod(tmp_path, 0o755)
    try:
        r = subprocess.run([unshare, "-U", *folio_command(), "index", str(root), "--endpoint", srv.url],
                           capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)})
    finally:
        os.chmod(root / "d", 0o755)
    if r.returncode != 0 and "Permission denied" in r.stderr and "d/b.md" not in r.stderr:
        pytest.skip(f"folio cannot run as another user here: {r.stderr.strip()[:200]}")
    assert r.returncode == 0, r.stderr
    assert "warning: d/b.md: skipped (Permission denied: its directory can be listed but not entered" in r.stderr


def test_config_set_project_keeps_the_files_comments_and_order(tmp_path, run_folio, _isolate_env):
    """folio.yaml is committed with the corpus, often copied from folio.yaml.example: `config set
    --project` rewrote it whole (yaml.safe_dump), every comment gone. The key's line is replaced in
    place (or added), and the file reads back as the settings it was given."""
    from pathlib import Path

    example = (Path(__file__).resolve().parent.parent / "folio.yaml.example").read_text(encoding="utf-8")
    root = tmp_path / "c"
    root.mkdir()
    (root / "folio.yaml").write_text(example, encoding="utf-8")
    comments = [ln for ln in example.splitlines() if ln.startswith("#")]
    for key, value in (("jobs", "3"), ("mode", "lexical"), ("exclude", "drafts/,tmp/"),
                       ("query_fields", "{input_type: query}")):
        r = run_folio("config", "set", "--project", key, value, cwd=root)
        assert r.returncode == 0, r.stderr
    text = (root / "folio.yaml").read_text(encoding="utf-8")
    assert [ln for ln in text.splitlines() if ln.startswith("#")] == comments
    shown = {ln.split()[0]: ln.split()[1] for ln in run_folio("config", cwd=root).stdout.splitlines()
             if ln.strip() and not ln.startswith(" ") and len(ln.split()) > 1}
    assert (shown["mode"], shown["jobs"]) == ("lexical", "3"), shown
    assert text.index("mode: lexical") < text.index("jobs: 3")  # each where it stood
    assert "- tmp/" in text and "input_type: query" in text
