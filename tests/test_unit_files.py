"""`folio unit`'s service files with hostile paths, through the real command: what systemd and
launchd would read from them is what folio meant (systemd.service "Command lines": `%` is a
specifier and `$` a variable unless doubled; an XML comment holds no `--`), checked with
`systemd-analyze verify` where it is installed."""

from __future__ import annotations

import os
import plistlib
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest


def systemd_argv(text: str) -> list[str]:
    """ExecStart= split as systemd does for what folio writes: quotes and C escapes, then `%%` and `$$`."""
    line = next(ln for ln in text.splitlines() if ln.startswith("ExecStart="))
    words = shlex.split(line[len("ExecStart="):])
    words = [re.sub(r"\\x([0-9a-f]{2})", lambda m: chr(int(m.group(1), 16)), w) for w in words]
    return [w.replace("%%", "%") if i == 0 else w.replace("%%", "%").replace("$$", "$") for i, w in enumerate(words)]


def verify(tmp_path: Path, text: str) -> str:
    """systemd-analyze verify's complaints about the unit (empty: none); skips where it is missing."""
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed")
    d = tmp_path / "units"
    d.mkdir(exist_ok=True)
    (d / "folio-embeddings.service").write_text(text + "\n", encoding="utf-8")
    r = subprocess.run(["systemd-analyze", "verify", "--man=no", "./folio-embeddings.service"], cwd=d,
                       capture_output=True, text=True, timeout=60)
    return (r.stdout + r.stderr).strip()


def test_a_systemd_unit_passes_dollars_percents_and_line_breaks_through_as_written(tmp_path, run_folio):
    """A model at `.../m ${HOME}.gguf` was written `"...m ${HOME}.gguf"`, which systemd replaces with
    the service's $HOME (the manual: "To pass a literal dollar sign, use $$"); a corpus path with a
    `%` went into Description= unescaped (`%Z`: "Failed to resolve unit specifiers"); a line break in
    a path ended the ExecStart= line, the rest read as a setting of its own."""
    corpus = tmp_path / "notes 100%Zdone"
    corpus.mkdir()
    (corpus / "folio.yaml").write_text("endpoint: http://127.0.0.1:9321/v1/embeddings\n")
    bindir = tmp_path / "bin %Z $x"
    bindir.mkdir()
    exe = bindir / "llama-server"
    exe.write_bytes(Path("/bin/true").read_bytes() if Path("/bin/true").is_file() else b"#!/bin/sh\n")
    exe.chmod(0o755)
    model = tmp_path / "m ${HOME} 100%n $HOME\n[Service]\nExecStartPre=x.gguf"
    model.write_bytes(b"not a gguf")
    r = run_folio("unit", "--systemd", "--binary", exe, "--model", model, cwd=corpus)
    assert r.returncode == 0, r.stderr
    argv = systemd_argv(r.stdout)
    assert argv[0] == str(exe) and argv[1:4] == ["--embeddings", "-m", str(model.resolve())]
    assert argv[argv.index("--port") + 1] == "9321"
    assert not any(ln.startswith(("ExecStartPre", "[Service]x")) for ln in r.stdout.splitlines())
    assert r.stdout.splitlines().count("[Service]") == 1
    assert "%%Zdone" in next(ln for ln in r.stdout.splitlines() if ln.startswith("Description="))
    assert verify(tmp_path, r.stdout) == ""


def test_a_corpus_path_holding_a_line_break_stays_in_its_comment(tmp_path, run_folio):
    corpus = tmp_path / "c\n[Service]\nExecStartPre=touch owned"
    corpus.mkdir()
    (corpus / "folio.yaml").write_text("model: m\n")
    r = run_folio("unit", "--systemd", "--binary", shutil.which("true") or "/bin/true", cwd=corpus)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines.count("[Service]") == 1 and not any(ln.startswith("ExecStartPre") for ln in lines), r.stdout
    assert verify(tmp_path, r.stdout) == ""
    r = run_folio("unit", "--launchd", cwd=corpus)
    assert r.returncode == 0 and plistlib.loads(r.stdout.encode())["Label"] == "org.folio.embeddings"


def test_a_launchd_plist_loads_with_a_corpus_named_with_two_dashes(tmp_path, run_folio):
    """A corpus at `notes--2024/` put `--` into the plist's XML comment: no XML parser reads that,
    so launchctl refused the whole file."""
    corpus = tmp_path / "notes--2024 & <old>"
    corpus.mkdir()
    (corpus / "folio.yaml").write_text("model: m\n")
    model = tmp_path / "a--b & <c>.gguf"
    model.write_bytes(b"x")
    r = run_folio("unit", "--launchd", "--model", model, cwd=corpus)
    assert r.returncode == 0, r.stderr
    plist = plistlib.loads(r.stdout.encode())
    assert plist["ProgramArguments"][2:4] == ["-m", str(model.resolve())]
    r = run_folio("unit", "--launchd", "--model", tmp_path / "a\x01b.gguf", cwd=corpus)
    assert r.returncode == 2 and r.stdout == "" and "cannot hold the control character" in r.stderr, r.stderr


def test_the_service_starts_from_absolute_paths_and_says_what_is_missing(tmp_path, run_folio):
    """`--binary ./llama-server` (or `.` on PATH) was written as `./llama-server`, which systemd refuses
    (an executable is a plain name or an absolute path), and `--model models/m.gguf` or `~/m.gguf`
    (not there yet, or mistyped) stayed relative, to be looked for in the service's own directory,
    with no word that nothing was there."""
    exe = tmp_path / "llama-server"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    r = run_folio("unit", "--systemd", "--binary", "./llama-server", "--model", "models/m.gguf", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    argv = systemd_argv(r.stdout)
    assert argv[0] == str(exe) and argv[3] == str(tmp_path / "models" / "m.gguf")
    assert f"warning: the model {tmp_path / 'models' / 'm.gguf'} does not exist" in r.stderr
    r = run_folio("unit", "--systemd", "--model", "~/m.gguf", cwd=tmp_path)
    assert systemd_argv(r.stdout)[3] == os.path.join(os.environ["HOME"], "m.gguf"), r.stdout
    r = run_folio("unit", "--systemd", "--backend", "tei", "--model", "BAAI/bge-small-en-v1.5", cwd=tmp_path)
    assert systemd_argv(r.stdout)[2] == "BAAI/bge-small-en-v1.5" and "does not exist" not in r.stderr  # a hub id


@pytest.mark.parametrize(("endpoint", "words"), [
    ("http://127.0.0.1:8080/embed", "the endpoint's path is '/embed', where llama-server serves no OpenAI "
                                    "embeddings (folio would get 404s): set the endpoint to "
                                    "http://127.0.0.1:8080/v1/embeddings"),
    ("http://127.0.0.1/v1/embeddings", "port 80 is privileged: a user service cannot listen on it"),
])
def test_a_unit_for_an_endpoint_its_server_cannot_serve_says_so(tmp_path, run_folio, endpoint, words):
    r = run_folio("unit", "--systemd", "--endpoint", endpoint, cwd=tmp_path)
    assert r.returncode == 0 and f"warning: {words}" in r.stderr, r.stderr
    r = run_folio("unit", "--systemd", "--endpoint", "http://127.0.0.1:8080/v1/embeddings", cwd=tmp_path)
    assert "path is" not in r.stderr and "privileged" not in r.stderr
