"""The settings files as a careful git user keeps them, through the real `folio config`: a typo is
named with the key meant, a key given twice is refused, `folio config set` edits a hand-written file
the way `git config` does (comments, order, BOM, line endings, mode, a link to a dotfile), and a bad
value names its line, or its variable and how to be rid of it."""

from __future__ import annotations

import json
import os
import stat

import pytest


def _user_config(home):
    p = home / ".config" / "folio" / "config.yaml"
    p.parent.mkdir(parents=True, exist_ok=True)
    return p


def one_line(r) -> str:
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    return lines[0]


def test_a_mistyped_key_is_told_the_key_meant_wherever_it_is_typed(tmp_path, run_folio, _isolate_env):
    """`folio config set timout 5` listed all twenty keys and left the user to spot `timeout`; in the
    user config a typo (`endpont:`) was passed over in silence, the default used, and a corpus key
    there (`exclude:`) never read, saying nothing."""
    r = run_folio("config", "set", "timout", "5", cwd=tmp_path)
    assert r.returncode == 2 and "unknown setting `timout` (did you mean `timeout`?)" in one_line(r)
    (tmp_path / "folio.yaml").write_text("model: m\nquery_timout: 3\n")
    r = run_folio("config", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert one_line(r).startswith(f"folio: {tmp_path / 'folio.yaml'} line 2: unknown setting `query_timout` (did "
                                  f"you mean `query_timeout`?)")
    (tmp_path / "folio.yaml").unlink()
    cfg = _user_config(_isolate_env)
    cfg.write_text("# mine\nendpont: http://127.0.0.1:9/v1/embeddings\n")
    r = run_folio("config", cwd=tmp_path)
    assert r.returncode == 1 and one_line(r).startswith(f"folio: {cfg} line 2: unknown setting `endpont` (did you "
                                                        f"mean `endpoint`?)"), r.stderr
    cfg.write_text("exclude: [drafts/]\n")
    r = run_folio("index", cwd=tmp_path)
    line = one_line(r)
    assert r.returncode == 1 and f"{cfg} line 1: `exclude` belongs to the corpus" in line, line
    assert "folio config set --project exclude" in line


def test_a_key_given_twice_is_refused_with_both_lines(tmp_path, run_folio, _isolate_env):
    """YAML forbids a key twice in one mapping; PyYAML kept the last in silence, so the first line a
    user edited did nothing, and `folio config set --project` changed the first one (the last still
    decided) then rewrote the whole file, comments gone."""
    (tmp_path / "folio.yaml").write_text("# ours\ntimeout: 5\nmodel: m\ntimeout: 9\n")
    r = run_folio("config", cwd=tmp_path)
    assert r.returncode == 1
    assert one_line(r) == (f"folio: {tmp_path / 'folio.yaml'} line 4: `timeout` is set twice (also on line 2), and "
                           f"only the last would count; keep one")


def test_config_set_edits_a_hand_written_file_as_git_config_would(tmp_path, run_folio, _isolate_env):
    """A BOM and CRLF line endings (a file from Windows) were kept only by luck: the endings turned to
    LF (every line changed in `git diff`); a quoted key (`"timeout": 5`) was not found, so a second
    `timeout:` was appended (a key twice); the comment at the end of the key's line was lost; the
    file's mode was reset (0664 became 0644)."""
    p = tmp_path / "folio.yaml"
    p.write_bytes(b'\xef\xbb\xbf# corpus settings\r\n"timeout": 5   # the server is slow\r\nmodel: m\r\n'
                  b"exclude:  # never indexed\r\n  - drafts/\r\n\r\n  - old/\r\n# the end\r\n")
    os.chmod(p, 0o664)
    for key, value in (("timeout", "9"), ("exclude", "a/, b/"), ("jobs", "2")):
        r = run_folio("config", "set", "--project", key, value, cwd=tmp_path)
        assert r.returncode == 0 and "note:" not in r.stderr, r.stderr
    assert p.read_bytes() == (b"\xef\xbb\xbf# corpus settings\r\ntimeout: 9   # the server is slow\r\nmodel: m\r\n"
                              b"exclude:  # never indexed\r\n- a/\r\n- b/\r\n# the end\r\njobs: 2\r\n")
    assert stat.S_IMODE(p.stat().st_mode) == 0o664
    r = run_folio("config", "set", "--project", "exclude", "c/", cwd=tmp_path)
    assert r.returncode == 0 and r.stderr.startswith('exclude = ["c/"] written to '), r.stderr  # what was written
    settings = json.loads(run_folio("config", "--json", cwd=tmp_path).stdout)["settings"]
    assert (settings["timeout"]["value"], settings["jobs"]["value"], settings["exclude"]["value"]) == (9, 2, ["c/"])


def test_config_set_writes_the_file_a_link_points_to(tmp_path, run_folio, _isolate_env):
    """A user config kept in a dotfiles repository and linked into ~/.config: `folio config set`
    replaced the link with a file of its own, so the dotfiles copy silently stopped being the one
    read. The file linked to is edited, as git edits a linked ~/.gitconfig; the link stays."""
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    real = dotfiles / "folio.yaml"
    real.write_text("# kept in git\nmodel: m\n")
    os.chmod(real, 0o644)
    cfg = _user_config(_isolate_env)
    cfg.symlink_to(real)
    r = run_folio("config", "set", "timeout", "30", cwd=tmp_path)
    assert r.returncode == 0 and f"written to {real}" in r.stderr, r.stderr
    assert cfg.is_symlink() and real.read_text() == "# kept in git\nmodel: m\ntimeout: 30\n"
    assert stat.S_IMODE(real.stat().st_mode) == 0o600  # it may hold a key: owner-only, as ever


@pytest.mark.parametrize(("env", "words"), [
    ({"FOLIO_TIMEOUT": "abc"}, "FOLIO_TIMEOUT: `timeout` must be a whole number from 1 to 3600, got 'abc' (or unset "
                               "FOLIO_TIMEOUT"),
    ({"FOLIO_QUERY_TIMEOUT": "0"}, "FOLIO_QUERY_TIMEOUT: `query_timeout` is too small (0); it must be at least 1 (or "
                                   "unset FOLIO_QUERY_TIMEOUT"),
])
def test_a_bad_environment_variable_is_named_with_the_way_out(tmp_path, run_folio, _isolate_env, env, words):
    for args in (("config",), ("index",), ("doctor",), ("unit",)):
        r = run_folio(*args, cwd=tmp_path, env=env)
        assert r.returncode == 1 and words in one_line(r), (args, r.stderr)


def test_mode_takes_any_case_as_watch_and_feedback_do(tmp_path, run_folio, _isolate_env):
    """FOLIO_WATCH=Poll and FOLIO_FEEDBACK=ON were taken, FOLIO_MODE=Hybrid refused."""
    r = run_folio("config", "--json", cwd=tmp_path, env={"FOLIO_MODE": "Hybrid", "FOLIO_WATCH": "Poll"})
    assert r.returncode == 0, r.stderr
    settings = json.loads(r.stdout)["settings"]
    assert (settings["mode"]["value"], settings["watch"]["value"]) == ("hybrid", "poll")


@pytest.mark.parametrize(("line", "words"), [
    ("timeout: yes", "`timeout` must be a whole number from 1 to 3600, got True"),  # was 1 second
    ("timeout: 2.9", "`timeout` must be a whole number from 1 to 3600, got 2.9"),   # was 2 seconds
])
def test_a_number_yaml_reads_as_a_bool_or_a_fraction_is_refused_not_cut(tmp_path, run_folio, _isolate_env, line,
                                                                         words):
    (tmp_path / "folio.yaml").write_text(f"model: m\n{line}\n")
    r = run_folio("config", cwd=tmp_path)
    assert r.returncode == 1 and one_line(r) == f"folio: {tmp_path / 'folio.yaml'} line 2: {words}", r.stderr


def test_an_endpoint_with_a_line_break_is_refused(tmp_path, run_folio, _isolate_env):
    """A folio.yaml (committed, so a clone's) could name an endpoint holding line breaks: it was
    taken, shown, and written by `folio unit` into the service file, where the lines after the break
    became directives of their own (an `ExecStartPre=` the user would install). An empty endpoint
    was told `did you mean http:///v1/embeddings?`."""
    (tmp_path / "folio.yaml").write_text('endpoint: "http://127.0.0.1:8080/v1/embeddings\\n[Service]\\n'
                                         'ExecStartPre=/bin/touch /tmp/owned"\n')
    for args in (("config",), ("unit",)):
        r = run_folio(*args, cwd=tmp_path)
        assert r.returncode == 1 and r.stdout == "", r.stdout
        assert "line 1: endpoint 'http://127.0.0.1:8080/v1/embeddings\\n[Service]" in one_line(r)
        assert "holds a line break, which no URL holds" in r.stderr
    r = run_folio("config", "set", "endpoint", "", cwd=tmp_path)
    assert r.returncode == 2 and "the endpoint is empty" in one_line(r) and "http:///" not in r.stderr


def test_config_set_says_a_bad_variable_still_decides(tmp_path, run_folio, _isolate_env):
    """With FOLIO_TIMEOUT=abc exported, `folio config set timeout 5` said only `written`, and every
    command then still stopped on the variable."""
    r = run_folio("config", "set", "timeout", "5", cwd=tmp_path, env={"FOLIO_TIMEOUT": "abc"})
    assert r.returncode == 0
    assert "note: here timeout still comes from env FOLIO_TIMEOUT (and its value 'abc' is refused" in r.stderr
    assert "unset FOLIO_TIMEOUT" in r.stderr
