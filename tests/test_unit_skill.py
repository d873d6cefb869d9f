"""`folio unit` (a printed service file, never installed), `folio skill` (the bundled SKILL.md),
and the documentation contract: every command has help text and appears in README.md, every flag
appears in SKILL.md, every setting in folio.yaml.example at its default, every FOLIO_* variable folio
reads in the docs, and SKILL.md is a valid Agent Skill."""

from __future__ import annotations

import os
import plistlib
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest
import yaml
from helpers import LLAMA_MODEL, REPO

from folio.cli import cli


def commands(group: click.Group = cli, prefix: str = "folio"):
    """(name path, command) for every command in the tree, groups included."""
    for name, cmd in sorted(group.commands.items()):
        path = f"{prefix} {name}"
        yield path, cmd
        if isinstance(cmd, click.Group):
            yield from commands(cmd, path)


def flags(cmd: click.Command) -> list[str]:
    out = []
    for p in cmd.params:
        if isinstance(p, click.Option):
            out += [o for o in p.opts + p.secondary_opts if o not in ("-h", "--help")]
    return out


# --------------------------------------------------------------------------- documentation contract


def test_every_flag_of_every_command_is_in_skill_md():
    skill = (REPO / "SKILL.md").read_text(encoding="utf-8")
    missing = []
    for path, cmd in [("folio", cli), *commands()]:
        if path != "folio" and path not in skill:
            missing.append(path)
        for flag in flags(cmd):
            # a flag counts as documented when it appears as a whole word (so --json is not --json-x)
            if not any(flag + end in skill for end in (" ", "`", "/", ",", ")", "\n", "=")):
                missing.append(f"{path} {flag}")
    assert not missing, f"SKILL.md does not document: {', '.join(missing)}"


def test_every_command_has_help_text_and_appears_in_the_readme():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for path, cmd in commands():
        assert (cmd.help or "").strip(), f"{path} has no help text"
        assert path in readme, f"README.md never mentions `{path}`"


@pytest.mark.parametrize("group", [(), ("config",)], ids=["folio", "folio config"])
def test_help_lists_every_command_on_one_whole_line(group, run_folio, tmp_path):
    """`folio --help` on an 80-column terminal cut most commands' line off with `...` (`config   Show
    every setting with where it came from (flag, env,...`): a newcomer could not read what they do."""
    r = run_folio(*group, "--help", cwd=tmp_path, env={"COLUMNS": "80"})
    assert r.returncode == 0, r.stderr
    listed = r.stdout.split("Commands:\n", 1)[1].splitlines()
    names = {ln.split()[0] for ln in listed if ln.strip()}
    want = cli.commands if not group else cli.commands[group[0]].commands
    assert names == set(want), listed
    assert len(listed) == len(want) and not any(ln.rstrip().endswith("...") for ln in listed), listed


def test_every_flag_of_every_command_is_in_the_reference_pages():
    """The README keeps to what a newcomer needs; every flag is explained in it or in docs/."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    text = "\n".join(p.read_text(encoding="utf-8") for p in pages)
    missing = [f"{path} {flag}" for path, cmd in [("folio", cli), *commands()] for flag in flags(cmd)
               if not any(flag + end in text for end in (" ", "`", "/", ",", ")", "]", "\n", "="))]
    assert not missing, f"neither README.md nor docs/*.md documents: {', '.join(missing)}"


def test_folio_yaml_example_shows_every_setting_at_its_default(run_folio, tmp_path):
    """folio.yaml.example is "every key of folio.yaml and the user config": each key folio reads is
    there (the user-only ones in comments), and copied as a corpus's folio.yaml it sets each one to
    the value `folio config` shows as the default, but for `exclude`, whose two patterns are examples."""
    import json
    import re

    from folio import config

    example = (REPO / "folio.yaml.example").read_text(encoding="utf-8")
    missing = [k for k in config.KEYS if not re.search(rf"^#? ?{k}:", example, re.M)]
    assert not missing, f"folio.yaml.example does not show: {missing}"
    bare, copied = tmp_path / "bare", tmp_path / "copied"
    bare.mkdir()
    copied.mkdir()
    (copied / "folio.yaml").write_text(example, encoding="utf-8")
    shown = {}
    for where in (bare, copied):
        r = run_folio("config", "--json", cwd=where)
        assert r.returncode == 0, r.stderr
        shown[where] = json.loads(r.stdout)["settings"]
    for key, setting in shown[copied].items():
        if setting["source"] == "folio.yaml" and key != "exclude":
            assert setting["value"] == shown[bare][key]["value"], (key, setting, shown[bare][key])


def test_every_environment_variable_folio_reads_is_documented():
    """A FOLIO_* variable the code reads is named where a user looks (README, SKILL.md, docs/,
    folio.yaml.example); only the hybrid window's two, private to tests and bench, are not."""
    import re

    private = {"FOLIO_WINDOW_MIN", "FOLIO_WINDOW_SIZE"}
    read = set()
    for path in (REPO / "folio").rglob("*.py"):
        read |= set(re.findall(r"[\"'](FOLIO_[A-Z0-9_]+)[\"']", path.read_text(encoding="utf-8")))
    pages = [REPO / "README.md", REPO / "SKILL.md", REPO / "folio.yaml.example", *(REPO / "docs").glob("*.md")]
    text = "\n".join(p.read_text(encoding="utf-8") for p in pages)
    missing = sorted(v for v in read - private if not re.search(rf"\b{v}\b", text))
    assert not missing, f"read by folio, documented nowhere: {missing}"


def test_links_in_the_readme_and_docs_resolve():
    import re

    broken = []
    for page in [REPO / "README.md", REPO / "SKILL.md", *sorted((REPO / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if "://" in target:
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(REPO)} -> {target}")
    assert not broken, f"links that resolve to nothing: {broken}"


def test_skill_md_is_a_valid_agent_skill():
    text = (REPO / "SKILL.md").read_text(encoding="utf-8")
    assert text.startswith("---\n")
    front = yaml.safe_load(text.split("---\n", 2)[1])
    assert front["name"] == "folio"
    assert isinstance(front["description"], str) and 40 < len(front["description"]) <= 1024
    assert set(front) <= {"name", "description", "license", "allowed-tools", "metadata"}
    body = text.split("---\n", 2)[2]
    for must in ("rg", "(stale)", "--json", "folio doctor", "not an empty corpus", "score orders candidates"):
        assert must in body, must


def test_packaged_skill_md_is_the_repository_one():
    assert (REPO / "folio" / "SKILL.md").read_bytes() == (REPO / "SKILL.md").read_bytes(), (
        "folio/SKILL.md (what `folio skill` prints) differs from SKILL.md: copy SKILL.md over it")


# --------------------------------------------------------------------------- folio skill


def test_folio_skill_prints_skill_md(run_folio, tmp_path):
    r = run_folio("skill", cwd=tmp_path)
    assert r.returncode == 0
    assert r.stdout == (REPO / "SKILL.md").read_text(encoding="utf-8").rstrip("\n") + "\n"


@pytest.mark.parametrize("args", [["skill"], ["--help"], ["doctor", "--help"], ["unit", "--help"], ["mcp", "--help"]])
def test_lean_commands_import_neither_numpy_nor_httpx(args, tmp_path):
    code = ("import sys\nfrom folio.cli import main\nsys.argv = ['folio', *sys.argv[1:]]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "heavy = sorted(m for m in ('numpy', 'httpx', 'markdown_it', 'mcp') if m in sys.modules)\n"
            "print('HEAVY=' + ','.join(heavy), file=sys.stderr)\n")  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, "-c", code, *args], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert "HEAVY=\n" in r.stderr, r.stderr


# --------------------------------------------------------------------------- folio unit


def exec_start(text: str) -> list[str]:
    line = next(ln for ln in text.splitlines() if ln.startswith("ExecStart="))
    return shlex.split(line[len("ExecStart="):])


def test_unit_serves_the_corpus_endpoint_with_the_gguf_context(run_folio, write_tree, tmp_path):
    write_tree(tmp_path, {"folio.yaml": "endpoint: http://127.0.0.1:9123/v1/embeddings\n", "d/a.md": "# A\n"})
    r = run_folio("unit", "--systemd", "--model", LLAMA_MODEL, cwd=tmp_path / "d")
    assert r.returncode == 0, r.stderr
    argv = exec_start(r.stdout)
    assert Path(argv[0]).name == "llama-server"
    assert argv[1:] == ["--embeddings", "-m", str(LLAMA_MODEL.resolve()), "--host", "127.0.0.1", "--port", "9123",
                        "-c", "512", "-b", "512", "-ub", "512"]  # the context MiniLM's GGUF header records
    assert "--pooling" not in argv  # only when the user names one
    assert "[Service]" in r.stdout and "WantedBy=default.target" in r.stdout
    assert "placeholder" not in r.stderr.lower() and "no --model" not in r.stderr
    assert not (tmp_path / ".folio").exists()  # printing a unit touches nothing


def test_unit_without_a_model_prints_a_placeholder_and_warns(run_folio, tmp_path):
    r = run_folio("unit", "--systemd", "--pooling", "mean", "--binary", "/opt/nowhere/llama-server",
                  cwd=tmp_path, env={"PATH": "/usr/bin:/bin"})  # fmt: skip
    assert r.returncode == 0
    argv = exec_start(r.stdout)
    assert argv[:4] == ["/opt/nowhere/llama-server", "--embeddings", "-m", "/path/to/embedding-model.gguf"]
    assert argv[argv.index("--port") + 1] == "8080" and argv[-2:] == ["--pooling", "mean"]
    assert argv[argv.index("-c") + 1] == "512"
    assert "warning: /opt/nowhere/llama-server is not on PATH" in r.stderr
    assert "warning: no --model given" in r.stderr and "--ctx" in r.stderr


def test_unit_finds_the_binary_on_path(run_folio, tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "llama-server"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    r = run_folio("unit", "--systemd", "--ctx", "8192", "--batch", "2048", cwd=tmp_path,
                  env={"PATH": f"{bindir}:/usr/bin:/bin"})  # fmt: skip
    argv = exec_start(r.stdout)
    assert argv[0] == str(exe)
    assert argv[argv.index("-c") + 1] == "8192" and argv[argv.index("-b") + 1] == "2048"
    assert argv[argv.index("-ub") + 1] == "2048"
    assert "not on PATH" not in r.stderr


def test_unit_launchd_plist_is_valid_and_tei_never_truncates(run_folio, tmp_path):
    r = run_folio("unit", "--launchd", "--backend", "tei", "--model", tmp_path, "--pooling", "last",
                  "--endpoint", "http://localhost:3000/v1/embeddings", cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    plist = plistlib.loads(r.stdout.encode())
    args = plist["ProgramArguments"]
    assert Path(args[0]).name == "text-embeddings-router"
    assert args[1:] == ["--model-id", str(tmp_path.resolve()), "--hostname", "localhost", "--port", "3000",
                        "--pooling", "last-token"]  # fmt: skip
    assert "--auto-truncate" not in args  # TEI's switch: present means on
    assert plist["EnvironmentVariables"] == {"AUTO_TRUNCATE": "false"}
    assert plist["Label"] == "org.folio.embeddings" and plist["KeepAlive"] is True


@pytest.mark.parametrize("kind", ["--systemd", "--launchd"])
def test_unit_says_how_to_install_folio_itself_under_its_distribution_name(run_folio, tmp_path, kind):
    from importlib.metadata import metadata

    name = metadata("folio-sections")["Name"]  # the name pip, pipx and uv install it by
    r = run_folio("unit", kind, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert f"pipx install {name}" in r.stdout and f"uv tool install {name}" in r.stdout


def test_unit_for_a_remote_endpoint_listens_everywhere_and_says_so(run_folio, tmp_path):
    r = run_folio("unit", "--systemd", "--endpoint", "http://gpu-box:8081/v1/embeddings", cwd=tmp_path)
    argv = exec_start(r.stdout)
    assert argv[argv.index("--host") + 1] == "0.0.0.0" and argv[argv.index("--port") + 1] == "8081"
    assert "install this unit on that machine" in r.stderr


def test_unit_usage_errors_exit_2(run_folio, tmp_path):
    assert run_folio("unit", "--backend", "vllm", cwd=tmp_path).returncode == 2
    r = run_folio("unit", "--backend", "tei", "--ctx", "512", cwd=tmp_path)
    assert r.returncode == 2 and "folio: --ctx and --batch" in r.stderr
    r = run_folio("unit", "--backend", "tei", "--pooling", "rank", cwd=tmp_path)
    assert r.returncode == 2 and "no rank pooling" in r.stderr


def test_systemd_quotes_paths_with_spaces(tmp_path):
    from folio.unit import build

    model = tmp_path / "my models" / "m 100%.gguf"
    model.parent.mkdir()
    model.write_bytes(b"not a gguf")
    u = build("http://127.0.0.1:8080/v1/embeddings", kind="systemd", model=str(model), binary="/bin/true")
    line = next(ln for ln in u.text.splitlines() if ln.startswith("ExecStart="))
    assert f'"{str(model.resolve()).replace("%", "%%")}"' in line
    assert "-c 512" in line  # not a GGUF: the safe default, with a warning
    assert any("--ctx" in w for w in u.warnings)
