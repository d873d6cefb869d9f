"""Shared helpers for the benchmarks: servers, whole-process timing, medians, the results table.

Benchmarks are run by hand (never by the test suite) and print ratios and medians.
"""

from __future__ import annotations

import json
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
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
FAKESERVER = REPO / "tests" / "fakeserver.py"
MODEL = SHARED / "llama" / "all-minilm-l6-v2-f16.gguf"
BENCH_DOC = REPO / "docs" / "benchmarks.md"


def _compiled() -> None:
    """Byte-compile the package once, as pip does at install: with PYTHONDONTWRITEBYTECODE set (this
    machine's shells set it) and no __pycache__, every folio process compiled ~70 modules afresh,
    ~0.1 s of every whole-process figure that a user's installed copy never pays."""
    import compileall

    compileall.compile_dir(str(REPO / "folio"), quiet=1)


_compiled()


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
        host, port = base.rsplit("//", 1)[1].rsplit(":", 1)
        try:  # another server on the port would answer the health check and every figure after it
            socket.create_connection((host, int(port)), timeout=0.5).close()
        except OSError:
            pass
        else:
            raise SystemExit(f"{base}: another process already listens there; stop it or choose another --port")
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


def fake_server(dim: int = 768, delay_ms: float = 0, cheap: bool = False) -> Server:
    """tests/fakeserver.py; cheap=True is the near zero-cost endpoint (see its --cheap)."""
    port = free_port()
    return Server([sys.executable, str(FAKESERVER), "--port", str(port), "--dim", str(dim),
                   "--delay-ms", str(delay_ms), *(["--cheap"] if cheap else [])], f"http://127.0.0.1:{port}")


def server_cpu(srv: Server) -> float:
    """CPU seconds (user+sys) the fake server has used so far."""
    with urllib.request.urlopen(srv.base + "/stats", timeout=10) as r:
        return float(json.loads(r.read())["cpu_s"])


@dataclass
class Measured:
    """One whole process: wall and CPU seconds, peak RSS (bytes), output, FOLIO_TIMINGS stages (s)."""

    wall: float
    cpu: float
    rss: int
    rc: int
    stdout: str
    stderr: str
    stages: dict = field(default_factory=dict)


def measure(cmd: list[str], cwd: Path | None = None, env: dict | None = None, check: bool = True,
            timeout: float | None = None) -> Measured:
    """Run cmd, reaping it with wait4 so its own rusage (CPU, peak RSS) is read, not a sum."""
    import tempfile

    full = {**os.environ, **(env or {})}
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        t = time.perf_counter()
        p = subprocess.Popen(cmd, cwd=cwd, env=full, stdout=fo, stderr=fe, stdin=subprocess.DEVNULL)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            pid, status, ru = os.wait4(p.pid, 0 if deadline is None else os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                p.kill()
                pid, status, ru = os.wait4(p.pid, 0)
                break
            time.sleep(0.01)
        wall = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        fo.seek(0)
        fe.seek(0)
        out, errs = fo.read().decode("utf-8", "replace"), fe.read().decode("utf-8", "replace")
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({p.returncode}): {errs[-2000:]}")
    stages = {}
    for line in errs.splitlines():
        if line.startswith("folio timings: ") or line.startswith("bare timings: "):
            stages = {k: v / 1000 for k, v in json.loads(line.split(": ", 1)[1]).items()}
    return Measured(wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024, p.returncode, out, errs, stages)


def folio(args: list[str], cwd: Path, env: dict | None = None, check: bool = True, **kw) -> Measured:
    return measure([*folio_cmd(), *args], cwd, env, check, **kw)


def llama_server(args: list[str] = ()) -> Server:
    binary = os.environ.get("FOLIO_LLAMA_BIN") or str(Path.home() / ".cache/folio-llama/b11434.0.0/llama-server")
    if not Path(binary).exists():
        sys.exit("no llama-server: run ../shared/llama/build-llama-server.sh")
    port = free_port()
    return Server([binary, "-m", str(MODEL), "--embeddings", "--host", "127.0.0.1", "--port", str(port), *args],
                  f"http://127.0.0.1:{port}")


def mcp_server_pid(exclude: set[int] = frozenset()) -> int | None:
    """A `folio mcp` process this script started (a child of ours running the mcp command), not in
    `exclude` (the ones already found)."""
    me = str(os.getpid())
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) in exclude:
            continue
        try:
            stat = (d / "stat").read_text()
            argv = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if stat.rsplit(")", 1)[1].split()[1] == me and b"mcp" in argv:
            return int(d.name)
    return None


def cpu_of(pid: int | None) -> float:
    """User+system CPU seconds the process has used (0 where /proc is not there)."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def ms(values: list[float]) -> str:
    """Median in ms, with p95, the range and n."""
    return (f"{statistics.median(values) * 1000:.1f} ms (p95 {pct(values, 95) * 1000:.1f}, "
            f"{min(values) * 1000:.1f}-{max(values) * 1000:.1f}, n={len(values)})")


def show(rows: list[tuple[str, str]], width: int = 52) -> None:
    for k, v in rows:
        print(f"  {k:<{width}} {v}")


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
    """Short HEAD, with +dirty when folio/ differs from it (the code measured is not the commit)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                              text=True).stdout.strip()
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "folio"], cwd=REPO).returncode != 0
        return head + ("+dirty" if dirty else "")
    except OSError:
        return "?"


def load() -> str:
    return "load average {:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


def record(section: str, rows: list[tuple[str, str]], extra: list[str] = (), note: str = "") -> None:
    """Append dated rows to docs/benchmarks.md under a heading (note first, e.g. the load average;
    then `extra` Markdown lines, if any)."""
    BENCH_DOC.parent.mkdir(exist_ok=True)
    if not BENCH_DOC.exists():
        BENCH_DOC.write_text("# Benchmarks\n\nRows are appended by the scripts in `bench/`; each names its date, "
                             "machine and commit. Medians of whole-process runs, min-max in brackets.\n")
    stamp = time.strftime("%Y-%m-%d")
    lines = [f"\n## {section} — {stamp}, {machine()}, commit {commit()}\n"]
    if note:
        lines.append(note + "\n")
    lines += ["| figure | value |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in rows]
    if extra:
        lines += ["", *extra]
    with BENCH_DOC.open("a") as f:
        f.write("\n".join(lines) + "\n")


def facets_for(text: str) -> tuple[str, str]:
    """Both agent facets for a question made of a heading (issue 40's cost benches): its words (the
    first two as a phrase), and a 50-word passage built around it."""
    words = text.split()
    phrase = f'"{" ".join(words[:2])}" ' if len(words) > 1 else ""
    passage = (f"This section explains {text}. It describes what {text} means, when it applies, the settings "
               f"that change it, and an example of {text} in practice, with the errors a reader meets and "
               f"how to fix each of them.")
    return phrase + " ".join(words), passage
