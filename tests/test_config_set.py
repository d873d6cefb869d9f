"""`folio config set` through the real command: what a bad value exits with, values that start with
`-`, list values in either form, and where the user config lives (XDG_CONFIG_HOME)."""

from __future__ import annotations

import json

import pytest
import yaml

# A bad value for each kind of check `folio config set` makes, and the words of its sentence.
BAD = [
    ("query_timeout", "abc", "must be a whole number"),
    ("query_timeout", "0", "it must be at least 1"),
    ("jobs", "100000", "it must be at most 64"),
    ("mode", "fast", "must be semantic, lexical or hybrid"),
    ("feedback", "sometimes", "must be auto, on or off"),
    ("watch", "nope", "must be auto, events, poll or off"),
    ("allow_insecure_key", "maybe", "must be true or false"),
    ("endpoint", "localhost:8080", "did you mean http://localhost:8080/v1/embeddings"),
    ("query_fields", "[a, b]", "must be a map of JSON fields"),
    ("key_hosts", "[1, 2]", "must be a list of strings"),
]


def _settings(run_folio, cwd) -> dict:
    r = run_folio("config", "--json", cwd=cwd)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["settings"]


@pytest.mark.parametrize(("key", "value", "words"), BAD, ids=[f"{k}={v}" for k, v, _ in BAD])
def test_a_bad_value_typed_on_the_command_line_is_a_usage_error(tmp_path, run_folio, _isolate_env, key, value,
                                                                words):
    """Every bad value `folio config set` is given exits 2 (a usage error, as README's exit codes and
    docs/settings.md say), in one sentence, writing nothing; some kinds exited 1 (a whole number that
    was not one, `mode`, a bool, a list), others 2. In a file, the same value is an error (exit 1)."""
    r = run_folio("config", "set", key, value, cwd=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("folio: folio config set: ") and words in lines[0], r.stderr
    assert not (_isolate_env / ".config" / "folio" / "config.yaml").exists()
    # the same value in the user config is no usage error: the file is named, exit 1
    cfg = _isolate_env / ".config" / "folio" / "config.yaml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text(yaml.safe_dump({key: yaml.safe_load(value) if key in ("query_fields", "key_hosts") else value}))
    r = run_folio("config", cwd=tmp_path)
    assert r.returncode == 1 and r.stderr.startswith(f"folio: {cfg} line 1: ") and words in r.stderr, r.stderr


def test_a_key_that_cannot_go_where_it_was_sent_is_a_usage_error(tmp_path, run_folio):
    for args, words in ((("--project", "api_key", "sk-x"), "cannot go in folio.yaml"),
                        (("exclude", "drafts/**"), "belongs to the corpus")):
        r = run_folio("config", "set", *args, cwd=tmp_path)
        assert r.returncode == 2 and words in r.stderr and "sk-x" not in r.stderr, r.stderr


def test_a_negative_value_reaches_its_check_and_names_the_range(tmp_path, run_folio, _isolate_env):
    """`folio config set query_timeout -1` was read by click as an unknown option `-1` ("No such
    option"): the user never learned the range. The value meets its check, wherever --project stands."""
    for args in (("query_timeout", "-1"), ("query_timeout", "-1", "--project"), ("--project", "query_timeout", "-1")):
        r = run_folio("config", "set", *args, cwd=tmp_path)
        assert r.returncode == 2, r.stderr
        assert r.stderr.strip() == "folio: folio config set: `query_timeout` is too small (-1); it must be at least 1", \
            r.stderr
    assert not (tmp_path / "folio.yaml").exists()
    # a text value starting with '-' is a value too; an option that does not exist is still named as one
    r = run_folio("config", "set", "query_prefix", "-q: ", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert _settings(run_folio, tmp_path)["query_prefix"]["value"] == "-q: "
    r = run_folio("config", "set", "--projcet", "mode", "lexical", cwd=tmp_path)
    assert r.returncode == 2 and "No such option '--projcet'" in r.stderr, r.stderr
    r = run_folio("config", "set", "--help", cwd=tmp_path)
    assert r.returncode == 0 and "KEY VALUE" in r.stdout


@pytest.mark.parametrize("typed", ["[drafts/**, old/**]", "drafts/**, old/**", " [ 'drafts/**', \"old/**\" ] "])
def test_a_list_setting_takes_the_yaml_flow_form_and_the_comma_form_alike(tmp_path, run_folio, typed):
    """`folio config set --project exclude "[a, b]"` split the text on commas only, writing the items
    `[a` and `b]`. Both forms give the same list, read back by `folio config` from valid YAML."""
    r = run_folio("config", "set", "--project", "exclude", typed, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert yaml.safe_load((tmp_path / "folio.yaml").read_text()) == {"exclude": ["drafts/**", "old/**"]}
    assert _settings(run_folio, tmp_path)["exclude"]["value"] == ["drafts/**", "old/**"]


def test_list_values_quoted_items_globs_and_brackets_left_open(tmp_path, run_folio, _isolate_env):
    r = run_folio("config", "set", "--project", "exclude", "['a,b/**', '[abc]*.md']", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert _settings(run_folio, tmp_path)["exclude"]["value"] == ["a,b/**", "[abc]*.md"]
    r = run_folio("config", "set", "--project", "exclude", "[abc]*.md", cwd=tmp_path)  # a glob's class, not a list
    assert r.returncode == 0 and _settings(run_folio, tmp_path)["exclude"]["value"] == ["[abc]*.md"], r.stderr
    r = run_folio("config", "set", "--project", "extensions", "[md, .markdown]", cwd=tmp_path)
    assert r.returncode == 0 and _settings(run_folio, tmp_path)["extensions"]["value"] == [".md", ".markdown"]
    r = run_folio("config", "set", "key_hosts", "[a.example, b.example]", cwd=tmp_path)
    assert r.returncode == 0 and _settings(run_folio, tmp_path)["key_hosts"]["value"] == ["a.example", "b.example"]
    before = (tmp_path / "folio.yaml").read_text()
    for typed in ("[a, b", "a, b]"):
        r = run_folio("config", "set", "--project", "exclude", typed, cwd=tmp_path)
        assert r.returncode == 2 and "has an unmatched bracket; write the list as" in r.stderr, r.stderr
    assert (tmp_path / "folio.yaml").read_text() == before


def test_a_relative_xdg_config_home_is_ignored(tmp_path, run_folio, _isolate_env):
    """The XDG Base Directory spec: a relative XDG_CONFIG_HOME is invalid and must be ignored. It was
    used as-is, so the user config moved with the current directory (and `config set` wrote one there)."""
    home = _isolate_env
    env = {"XDG_CONFIG_HOME": "rel-config"}
    r = run_folio("config", "set", "mode", "lexical", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "rel-config").exists()
    assert (home / ".config" / "folio" / "config.yaml").read_text() == "mode: lexical\n"
    r = run_folio("config", "--json", cwd=tmp_path, env=env)
    data = json.loads(r.stdout)
    assert data["user_file"] == str(home / ".config" / "folio" / "config.yaml")
    assert data["settings"]["mode"] == {"value": "lexical", "source": "user config"}


def test_relative_xdg_runtime_and_cache_dirs_are_ignored_by_a_run(tmp_path, run_folio, fake_server, _isolate_env):
    """The same rule for the directory where a run marks the server it uses (XDG_RUNTIME_DIR, else
    XDG_CACHE_HOME): relative, they were taken from the current directory, here the corpus."""
    srv = fake_server()
    root = tmp_path / "c"
    (root / "rt").mkdir(parents=True)
    (root / "a.md").write_text("# A\n\nalpha text\n")
    r = run_folio("index", "--endpoint", srv.url, cwd=root, env={"XDG_RUNTIME_DIR": "rt", "XDG_CACHE_HOME": "cache"})
    assert r.returncode == 0, r.stderr
    assert not (root / "rt" / "folio").exists() and not (root / "cache").exists()
    assert (_isolate_env / ".cache" / "folio" / "servers").is_dir()


def test_unset_removes_a_key_keeps_the_others_and_says_what_decides_it_now(tmp_path, run_folio, _isolate_env):
    """A user who set `jobs 4` and wanted the default back had no command for it (`folio config unset`
    was `No such command`) and had to edit the YAML by hand; `folio config show` (the natural word,
    as for git) was refused too. unset removes the key's line, keeps the file's other lines and
    comments, and says what now decides the key."""
    cfg = _isolate_env / ".config" / "folio" / "config.yaml"
    assert run_folio("config", "set", "jobs", "4", cwd=tmp_path).returncode == 0
    assert run_folio("config", "set", "mode", "lexical", cwd=tmp_path).returncode == 0
    cfg.write_text("# mine\n" + cfg.read_text())
    r = run_folio("config", "unset", "jobs", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines() == [f"jobs removed from {cfg}", "jobs is now 1 (default)"], r.stderr
    assert cfg.read_text() == "# mine\nmode: lexical\n"
    assert _settings(run_folio, tmp_path)["jobs"] == {"value": 1, "source": "default"}
    # again: nothing to remove, said, exit 0; a folio.yaml that still sets it is named with the command
    (tmp_path / "folio.yaml").write_text("mode: semantic\n")
    r = run_folio("config", "unset", "mode", cwd=tmp_path)
    assert r.returncode == 0 and cfg.read_text() == "# mine\n", r.stderr
    assert "mode is now semantic (folio.yaml); `folio config unset --project mode` removes it there" in r.stderr
    r = run_folio("config", "unset", "jobs", cwd=tmp_path)
    assert r.returncode == 0 and r.stderr.startswith(f"{cfg} does not set jobs: nothing to remove"), r.stderr
    r = run_folio("config", "unset", "--project", "mode", cwd=tmp_path)
    assert r.returncode == 0 and (tmp_path / "folio.yaml").read_text() == "", r.stderr
    r = run_folio("config", "unset", "jbos", cwd=tmp_path)
    assert r.returncode == 2 and "did you mean `jobs`" in r.stderr, r.stderr
    # `folio config show` is `folio config`
    shown, bare = run_folio("config", "show", cwd=tmp_path), run_folio("config", cwd=tmp_path)
    assert shown.returncode == 0 and shown.stdout == bare.stdout and "jobs" in shown.stdout
    assert json.loads(run_folio("config", "show", "--json", cwd=tmp_path).stdout)["settings"]["mode"]["source"] \
        == "default"
