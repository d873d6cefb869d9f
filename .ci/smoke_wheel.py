"""The release as a user gets it: build the sdist and the wheel (`python -m build`, the wheel built from
the sdist), check them (`twine check --strict`), install the wheel alone into a fresh venv outside the
checkout, and run folio from there with the checkout out of reach: --version, skill, index + query
with no server, and `folio mcp` listing its tools. A file the package needs that the wheel lacks
fails here, not on a user's machine.

The build runs in a copy of the files a clone holds (git's tracked and unignored files): an
`*.egg-info/` left in the checkout by `pip install -e .` lists the files of an earlier build, and
setuptools would ship them from that list even when pyproject.toml no longer names them.

Run by .ci/run with the CI venv's python (which has build, twine and the MCP client). Exits non-zero,
naming the step, on any failure. Writes only under a temporary directory, which it removes.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TOOLS = {"query", "show", "status", "index", "ls", "similar"}
DOWN = "http://127.0.0.1:9/v1/embeddings"  # the discard port: nothing answers, folio ranks lexically
CORPUS = {
    "finance/revenue.md": "---\nstatus: live\n---\n# Revenue\n\nHow money comes in.\n\n## Timing\n\n"
                          "Revenue is recognised when the performance obligation is satisfied.\n",
    "ops/oncall.md": "# On call\n\nThe rota changes every Monday.\n\n## Paging\n\nPages go to the primary first.\n",
}
QUESTION = "when is revenue recognised"


class SmokeFailed(Exception):
    pass


def check(ok: bool, what: str) -> None:
    if not ok:
        raise SmokeFailed(what)


def run(argv, *, cwd: Path, env: dict | None = None, what: str) -> str:
    r = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=600)
    if r.returncode != 0:
        raise SmokeFailed(f"{what}: exit {r.returncode}\n{r.stdout}{r.stderr}".rstrip())
    return r.stdout


def dist_name() -> str:
    """pyproject.toml's [project] name: what users install (`folio` on PyPI is another project)."""
    import tomllib  # Python 3.11, as CI's venv

    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["name"]


DIST_NAME = dist_name()


def source_version() -> str:
    """folio.__version__ as the checkout's source text says it (the one place the version lives)."""
    tree = ast.parse((REPO / "folio" / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__version__" for t in node.targets):
            return ast.literal_eval(node.value)
    raise SmokeFailed("folio/__init__.py sets no __version__")


def package_files() -> list[str]:
    """Every file of the `folio` package in the checkout: tracked by git when this is a clone."""
    r = subprocess.run(["git", "ls-files", "-z", "folio"], cwd=REPO, capture_output=True, text=True)
    if r.returncode == 0 and r.stdout:
        return sorted(p for p in r.stdout.split("\0") if p)
    return sorted(p.relative_to(REPO).as_posix() for p in (REPO / "folio").rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts)


def clean_copy(dest: Path) -> Path:
    """The checkout's files as a clone holds them (symlinks kept as links), with no build leftovers."""
    r = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                       capture_output=True, text=True)
    if r.returncode != 0:
        shutil.copytree(REPO, dest, symlinks=True, ignore=shutil.ignore_patterns(
            ".git", ".venv*", "*.egg-info", "build", "dist", ".folio", "__pycache__", "*_cache", ".hypothesis"))
        return dest
    for rel in sorted(set(filter(None, r.stdout.split("\0")))):
        src, dst = REPO / rel, dest / rel
        if not src.is_symlink() and not src.exists():
            continue  # deleted in the work tree, not yet in git's index
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            dst.symlink_to(os.readlink(src))
        else:
            shutil.copy2(src, dst)
    return dest


def check_wheel(wheel: Path, version: str) -> None:
    """The wheel holds every package file with the checkout's bytes (SKILL.md is a symlink in the
    checkout: the wheel must carry the text), and nothing outside `folio/` and its dist-info."""
    dist_info = f"{DIST_NAME.replace('-', '_')}-{version}.dist-info/"
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        missing = [p for p in package_files() if p not in names]
        check(not missing, f"the wheel lacks {', '.join(missing)}")
        differ = [p for p in package_files() if z.read(p) != (REPO / p).read_bytes()]
        check(not differ, f"the wheel's copy differs from the checkout: {', '.join(differ)}")
        stray = sorted(n for n in names if not n.startswith(("folio/", dist_info)))
        check(not stray, f"the wheel holds files outside folio/ and {dist_info}: {', '.join(stray)}")


def smoke(work: Path) -> None:
    version = source_version()
    started = time.monotonic()
    dist, src = work / "dist", clean_copy(work / "src")
    run([sys.executable, "-m", "build", "--outdir", dist, src], cwd=work, what="python -m build")
    wheels, sdists = sorted(dist.glob("*.whl")), sorted(dist.glob("*.tar.gz"))
    check(len(wheels) == 1 and len(sdists) == 1, f"python -m build made {sorted(p.name for p in dist.iterdir())}")
    wheel = wheels[0]
    check(wheel.name == f"{DIST_NAME.replace('-', '_')}-{version}-py3-none-any.whl",
          f"the wheel is named {wheel.name}, not for {DIST_NAME} {version}")
    run([sys.executable, "-m", "twine", "check", "--strict", wheel, sdists[0]], cwd=work, what="twine check")
    check_wheel(wheel, version)
    built = time.monotonic()

    venv = work / "venv"
    # This pip installs into the new venv (`--python`): a venv without pip of its own, and no .pyc
    # compiled ahead, is half the time (10 s against 19 s) and the same files.
    run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=work, what="python -m venv")
    py, folio = venv / "bin" / "python", venv / "bin" / "folio"
    run([sys.executable, "-m", "pip", "--python", py, "install", "--quiet", "--no-compile",
         "--disable-pip-version-check", wheel], cwd=work, what="pip install the wheel into a fresh venv")
    installed = time.monotonic()

    # folio as a user runs it: from elsewhere, its own HOME and config, no folio setting inherited,
    # nothing that reaches the checkout, and no embeddings server.
    home = work / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("FOLIO_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), FOLIO_ENDPOINT=DOWN,
               PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}")

    where = run([py, "-c", "import folio; print(folio.__file__)"], cwd=work, env=env, what="import folio").strip()
    check(Path(where).resolve().is_relative_to(venv.resolve()), f"folio was imported from {where}, not the venv")
    meta = run([py, "-c", f"import importlib.metadata as m; print(m.version({DIST_NAME!r}))"], cwd=work, env=env,
               what="importlib.metadata.version").strip()
    check(meta == version, f"the installed metadata says {meta}, the source {version}")
    for argv in ([folio, "--version"], [py, "-m", "folio", "--version"]):
        said = run(argv, cwd=work, env=env, what=" ".join(map(str, argv[-3:]))).strip()
        check(said == f"folio, version {version}", f"`{' '.join(map(str, argv[-3:]))}` said {said!r}")

    skill = run([folio, "skill"], cwd=work, env=env, what="folio skill")
    check(skill.rstrip("\n") == (REPO / "SKILL.md").read_text(encoding="utf-8").rstrip("\n"),
          "`folio skill` does not print SKILL.md")
    run([py, "-c", "from folio.doctor import load_pairs; assert load_pairs()"], cwd=work, env=env,
        what="folio doctor's structure set (folio/data/structure_pairs.yaml)")

    corpus = work / "corpus"
    for rel, text in CORPUS.items():
        (corpus / rel).parent.mkdir(parents=True, exist_ok=True)
        (corpus / rel).write_text(text, encoding="utf-8")
    run([folio, "index"], cwd=corpus, env=env, what="folio index (no server)")
    answer = json.loads(run([folio, "query", QUESTION, "--json"], cwd=corpus, env=env, what="folio query"))
    top = answer["results"][0] if answer.get("results") else {}
    check(answer.get("mode") == "lexical" and top.get("path") == "finance/revenue.md",
          f"folio query with no server answered {json.dumps(answer)[:400]}")

    kept = run([folio, "ls", "--where", "status=live"], cwd=corpus, env=env, what="folio ls --where").split()
    check(kept == ["finance/revenue.md"], f"folio ls --where status=live listed {kept}")

    tools, server_version = list_mcp_tools(folio, corpus, env)
    check(set(tools) == TOOLS, f"folio mcp lists the tools {sorted(tools)}, not {sorted(TOOLS)}")
    check(server_version == version, f"folio mcp reports version {server_version}, the source {version}")
    done = time.monotonic()
    print(f"smoke-wheel: {wheel.name} passed (build and checks {built - started:.1f} s, "
          f"fresh venv and install {installed - built:.1f} s, commands {done - installed:.1f} s)")


def list_mcp_tools(folio: Path, corpus: Path, env: dict) -> tuple[list[str], str | None]:
    """The tools and the server version `folio mcp` reports to the MCP SDK's own stdio client."""
    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=str(folio), args=["mcp", "--root", str(corpus)], cwd=str(corpus),
                                   env=env)

    async def body():
        async with Client(params, read_timeout_seconds=120) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            info = client.server_info
            return names, info.version if info else None

    return anyio.run(body)


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="folio-smoke-"))
    try:
        smoke(work)
    except (SmokeFailed, subprocess.TimeoutExpired) as e:
        print(f"smoke-wheel: FAILED: {e}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
