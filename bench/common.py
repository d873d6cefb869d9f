"""Shared helpers for the benchmarks: servers, whole-process timing, medians, the results table.

Benchmarks are run by hand (never by the test suite) and print ratios and medians.
"""

from __future__ import annotations

import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
FAKESERVER = REPO / "tests" / "fakeserver.py"
MODEL = SHARED / "llama" / "all-minilm-l6-v2-f16.gguf"
BENCH_DOC = REPO / "docs" / "benchmarks.md"


def folio_cmd() -> list[str]:
    script = Path(sys.executable).parent / "folio"
    return [str(script)] if script.exists() else [sys.executable, "-m", "folio"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_health(base: str, timeout: float = 60.0) -> None:
    end = time.time() + timeout
    while time.time() < end:
        try:
            with urllib.request.urlopen(base + "/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{base} did not become healthy")


class Server:
    def __init__(self, cmd: list[str], base: str):
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.base = base
        self.url = base + "/v1/embeddings"
        wait_health(base)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def fake_server(dim: int = 768, delay_ms: float = 0) -> Server:
    port = free_port()
    return Server([sys.executable, str(FAKESERVER), "--port", str(port), "--dim", str(dim),
                   "--delay-ms", str(delay_ms)], f"http://127.0.0.1:{port}")


def llama_server(args: list[str] = ()) -> Server:
    binary = os.environ.get("FOLIO_LLAMA_BIN") or str(Path.home() / ".cache/folio-llama/b11434.0.0/llama-server")
    if not Path(binary).exists():
        sys.exit("no llama-server: run ../shared/llama/build-llama-server.sh")
    port = free_port()
    return Server([binary, "-m", str(MODEL), "--embeddings", "--host", "127.0.0.1", "--port", str(port), *args],
                  f"http://127.0.0.1:{port}")


def run(args: list[str], cwd: Path, env: dict | None = None, check: bool = True) -> tuple[float, str, str]:
    full = {**os.environ, **(env or {})}
    t = time.perf_counter()
    p = subprocess.run([*folio_cmd(), *args], cwd=cwd, env=full, capture_output=True, text=True)
    dt = time.perf_counter() - t
    if check and p.returncode != 0:
        raise RuntimeError(f"folio {' '.join(args)} failed: {p.stderr}")
    return dt, p.stdout, p.stderr


def stats(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def fmt(s: dict, unit: str = "s", scale: float = 1.0) -> str:
    return f"{s['median'] * scale:.3f} {unit} ({s['min'] * scale:.3f}-{s['max'] * scale:.3f}, n={s['n']})"


def fresh_copy(src: Path, dest: Path) -> Path:
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns(".folio"))
    return dest


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                              text=True).stdout.strip()
    except OSError:
        return "?"


def record(section: str, rows: list[tuple[str, str]], extra: list[str] = ()) -> None:
    """Append dated rows to docs/benchmarks.md under a heading (then `extra` Markdown lines, if any)."""
    BENCH_DOC.parent.mkdir(exist_ok=True)
    if not BENCH_DOC.exists():
        BENCH_DOC.write_text("# Benchmarks\n\nRows are appended by the scripts in `bench/`; each names its date, "
                             "machine and commit. Medians of whole-process runs, min-max in brackets.\n")
    stamp = time.strftime("%Y-%m-%d")
    lines = [f"\n## {section} — {stamp}, {machine()}, commit {commit()}\n", "| figure | value |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in rows]
    if extra:
        lines += ["", *extra]
    with BENCH_DOC.open("a") as f:
        f.write("\n".join(lines) + "\n")
