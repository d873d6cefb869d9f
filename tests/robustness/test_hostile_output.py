"""What folio prints cannot be forged by the corpus it reads (issue 15, items 6-8): a newline in a
file name cannot split a row into a line of its own, an escape sequence in a name or a heading never
reaches the terminal raw, `--json` and `-0` stay exact, and input folio cannot read gets a sentence."""

from __future__ import annotations

import json
import os
import re

import pytest
from helpers import run_folio, write_tree

EVIL_DIR = "evil\n/etc"  # a directory whose name ends in a newline, holding etc/passwd.md
EVIL = EVIL_DIR + "/passwd.md"
ESC_NAME = "esc\x1b[31m.md"
OSC = "\x1b]0;pwned\x07"
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # anything raw but \t and \n


@pytest.fixture
def hostile(tmp_path, fake_server):
    srv = fake_server(dim=32)
    root = write_tree(tmp_path / "c", {
        EVIL: "# passwd\n\nThe lighthouse keeper's password file.\n",
        ESC_NAME: f"# Title {OSC} here\n\nThe lighthouse keeper trims the wick.\n",
        "long.md": f"# Long {OSC}\n\nlighthouse " + "x" * 900 + "\n",
        "plain.md": "# Plain\n\nA kettle of tea by the lighthouse.\n",
    })
    r = run_folio("index", "--endpoint", srv.url, "--max-chars", "300", cwd=root)
    assert r.returncode == 0, r.stderr
    return root


def no_raw_controls(r):
    for stream in (r.stdout, r.stderr):
        assert not CONTROL.search(stream), stream
        assert "\u009b" not in stream


def test_a_newline_in_a_name_never_prints_a_line_of_its_own(hostile):
    for args in (["--paths-only"], [], ["--lexical", "--paths-only"], ["--lexical"]):
        r = run_folio("query", "lighthouse keeper password", "-l", "10", *args, cwd=hostile)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        assert not any(line.startswith("/etc/") for line in lines), r.stdout
        assert '"evil\\n/etc/passwd.md":1-3' in lines if "--paths-only" in args else \
            any('  "evil\\n/etc/passwd.md":1-3' in line for line in lines), r.stdout  # hybrid adds its ranks after
        assert '"esc\\033[31m.md":1-3' in r.stdout
        no_raw_controls(r)
        if "--paths-only" not in args:  # the heading trail: escaped, quoted, on its own line
            assert '    "Title \\033]0;pwned\\a here"' in lines


def test_show_takes_a_quoted_path_as_query_printed_it(hostile):
    """`folio show PATH:START-END` takes each reference `--paths-only` printed, quoted names too."""
    r = run_folio("query", "lighthouse keeper password", "-l", "10", "--paths-only", cwd=hostile)
    refs = r.stdout.splitlines()
    quoted = [ref for ref in refs if ref.startswith('"')]
    assert len(quoted) >= 2, refs  # the newline's name and the escape sequence's
    assert "The lighthouse keeper's password file." in run_folio("show", quoted[0] if "evil" in quoted[0] else
                                                                  quoted[1], cwd=hostile).stdout
    for ref in refs:
        shown = run_folio("show", ref, cwd=hostile)
        assert shown.returncode == 0, (ref, shown.stderr)
        assert "current)" in shown.stdout.splitlines()[-1], (ref, shown.stdout)
        assert not CONTROL.search(shown.stderr)  # piped, stdout is the file's own lines, exact


def test_json_and_null_output_carry_the_exact_names(hostile):
    r = run_folio("query", "lighthouse", "-l", "10", "--json", cwd=hostile)
    assert r.returncode == 0, r.stderr
    no_raw_controls(r)
    rows = json.loads(r.stdout)["results"]
    assert {EVIL, ESC_NAME} <= {h["path"] for h in rows}
    by_path = {h["path"]: h for h in rows}
    assert by_path[EVIL]["ref"] == EVIL + ":1-3"
    assert by_path[ESC_NAME]["trail"] == [f"Title {OSC} here"]

    for flag in ("-0", "--null"):
        r = run_folio("query", "lighthouse", "-l", "10", flag, cwd=hostile)
        assert r.returncode == 0, r.stderr
        assert r.stdout.endswith("\0")
        refs = r.stdout[:-1].split("\0")
        assert EVIL + ":1-3" in refs and ESC_NAME + ":1-3" in refs
        assert len(refs) == len(rows)
    r = run_folio("query", "lighthouse", "-0", "--json", cwd=hostile)
    assert r.returncode == 2 and "choose one" in r.stderr


def test_show_status_and_notices_quote_what_they_name(hostile):
    r = run_folio("show", EVIL + ":1-3", cwd=hostile)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1].startswith('-- "evil\\n/etc/passwd.md":L1-L3 (sha ')
    assert "The lighthouse keeper's password file." in r.stdout

    r = run_folio("status", "--truncated", cwd=hostile)
    assert r.returncode == 0, r.stderr
    no_raw_controls(r)
    assert 'long.md:3-3  "Long \\033]0;pwned\\a"' in r.stdout.splitlines()

    # a notice that names a changed file: the file is stale, and the warning line stays one line
    (hostile / EVIL).write_text("# passwd\n\nThe lighthouse keeper's password file, edited.\n")
    r = run_folio("query", "lighthouse keeper password", "--paths-only", "--no-refresh", cwd=hostile)
    assert r.returncode == 0, r.stderr
    assert 'warning: "evil\\n/etc/passwd.md":1-3 is stale' in r.stderr.splitlines()
    no_raw_controls(r)
    r = run_folio("show", EVIL + ":1-3", cwd=hostile)
    assert 'note: "evil\\n/etc/passwd.md" changed since it was indexed' in r.stderr
    no_raw_controls(r)


def test_a_file_name_that_is_not_utf8_is_named_and_skipped(tmp_path, fake_server):
    srv = fake_server(dim=32)
    root = tmp_path / "c"
    write_tree(root, {"plain.md": "# Plain\n\nA kettle of tea.\n"})
    with open(os.path.join(os.fsencode(root), b"bad\xff\x1b.md"), "wb") as fh:
        fh.write(b"# Bad\n\nA kettle.\n")
    r = run_folio("index", "--endpoint", srv.url, cwd=root)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    assert "warning: bad\\377\\033.md: the file name is not UTF-8" in r.stderr
    assert "indexed 1 file," in r.stdout
    no_raw_controls(r)


@pytest.mark.parametrize("args", [
    ["query", b"light\xffhouse"], ["query", b"tea", "--lexical", "--where", b"k=\xfe"], ["show", b"bad\xff.md:1-2"]])
def test_an_argument_that_is_not_utf8_gets_a_sentence(hostile, args):
    import subprocess

    from helpers import folio_command

    r = subprocess.run([*folio_command(), *args], cwd=hostile, capture_output=True)
    err = r.stderr.decode()
    assert r.returncode == 2, err
    assert "Traceback" not in err
    assert err.startswith("folio: ") and "not UTF-8" in err and "\\37" in err


def _on_a_terminal(args, cwd) -> bytes:
    """stdout of `folio ARGS` when it is a terminal (a pty), as the terminal receives it."""
    import pty
    import select
    import subprocess

    from helpers import folio_command

    master, slave = pty.openpty()
    proc = subprocess.Popen([*folio_command(), *args], cwd=cwd, stdout=slave, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    os.close(slave)
    got = b""
    try:
        while select.select([master], [], [], 30)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the program closed its side
                break
            if not chunk:
                break
            got += chunk
    finally:
        os.close(master)
        proc.wait(timeout=30)
        proc.stderr.close()
    assert proc.returncode == 0
    return got


def test_show_on_a_terminal_makes_a_files_control_characters_visible_and_piped_keeps_them_exact(tmp_path):
    """`folio show` prints a file's own lines: on a terminal its escape sequences and other control
    characters are shown escaped, as query output shows a heading's (issue 30); piped, the lines are
    exactly the file's bytes (a tab and the newlines kept in both)."""
    import subprocess

    from helpers import folio_command

    lines = [b"# Title", b"", b"red \x1b[31mRED\x1b[0m, a bell \x07, a lone \r return, a\ttab " + OSC.encode(), b"end"]
    root = write_tree(tmp_path / "c", {"a.md": b"\n".join(lines) + b"\n"})
    assert run_folio("index", "--endpoint", "http://127.0.0.1:9/v1/embeddings", cwd=root).returncode == 0
    shown = _on_a_terminal(["show", "a.md:1-4"], root).replace(b"\r\n", b"\n")  # the pty's own line ends
    assert not re.search(rb"[\x00-\x08\x0b-\x1f\x7f]", shown), shown
    assert b"red \\033[31mRED\\033[0m, a bell \\a, a lone \\r return, a\ttab \\033]0;pwned\\a" in shown, shown
    piped = subprocess.run([*folio_command(), "show", "a.md:1-4"], cwd=root, capture_output=True)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.split(b"\n")[:4] == lines, piped.stdout
