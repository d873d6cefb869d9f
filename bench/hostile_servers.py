"""Peak memory and time of `folio index` and `folio query` against hostile servers (issue 30).

Each mode of tests/hostileserver.py (an endless chunked body, a huge Content-Length, a gzip bomb,
one byte a second, endless `100 Continue`, ...) is met by a fresh `folio index --endpoint URL` and by
a `folio query` on an index built against a good server whose port the hostile one then took. Each
run is capped (address space `--cap` MB, `--kill` seconds) so a folio without bounds cannot take
the machine; a run that reaches a cap says so. Prints a Markdown table: exit code, peak RSS
(ru_maxrss of the child, read by wait4), wall seconds, and the last line folio printed.

    python bench/hostile_servers.py [--timeout 5] [--cap 1500] [--kill 60] [--src DIR] [--proxy] [MODE ...]

`--src DIR`: run the folio package found in DIR (e.g. a copy of another checkout) instead of this one.
`--proxy`: the hostile server is the HTTP proxy (HTTP_PROXY) instead of the endpoint: folio's
requests then go through httpx, the path TLS and hosts off this machine take.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, fake_server, free_port  # noqa: E402

HOSTILE = REPO / "tests" / "hostileserver.py"
DOCS = {f"d{i}.md": f"# Doc {i}\n\nWords about lighthouses and kettles, part {i}.\n\n## More\n\nTea {i}.\n"
        for i in range(6)}


def hostile(mode: str, port: int) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, str(HOSTILE), mode, "--port", str(port)], stdout=subprocess.PIPE,
                         text=True)
    p.stdout.readline()
    return p


def run(args: list[str], cwd: Path, env: dict, cap_mb: int, kill_s: float) -> tuple[int | str, float, float, str]:
    """(exit code or what ended it, peak RSS MB, seconds, last stderr line)."""
    cmd = ["prlimit", f"--as={cap_mb << 20}", "--", sys.executable, "-m", "folio", *args]
    with tempfile.TemporaryFile() as err:
        t = time.monotonic()
        p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL)
        killed = False
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - t > kill_s:
                p.kill()
                pid, status, ru = os.wait4(p.pid, 0)
                killed = True
                break
            time.sleep(0.05)
        secs = time.monotonic() - t
        err.seek(0)
        text = err.read().decode("utf-8", "replace")
    lines = [ln for ln in text.splitlines() if ln.strip()]
    last = lines[-1] if lines else ""
    code: int | str = os.waitstatus_to_exitcode(status)
    if killed:
        code = f"killed at {kill_s:g} s"
    elif "MemoryError" in text:
        code = f"MemoryError ({code})"
    elif "Traceback" in text:
        code = f"traceback ({code})"
    return code, ru.ru_maxrss / 1024, secs, last


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("modes", nargs="*")
    ap.add_argument("--timeout", type=float, default=5)
    ap.add_argument("--cap", type=int, default=1500, help="address-space cap for folio, MB")
    ap.add_argument("--kill", type=float, default=60, help="seconds after which a run is killed")
    ap.add_argument("--src", type=Path, default=REPO, help="a checkout whose folio package to run")
    ap.add_argument("--proxy", action="store_true", help="the hostile server is the proxy (the httpx path)")
    a = ap.parse_args()
    modes = a.modes or [ln.split("``")[1] for ln in HOSTILE.read_text().splitlines()
                        if ln.startswith("- ``") and ln.split("``")[1] != "redirect"]
    home = tempfile.TemporaryDirectory(prefix="hostile-home-")  # no user config of yours in the way
    env = {**os.environ, "PYTHONPATH": str(a.src.resolve()), "FOLIO_TIMEOUT": f"{a.timeout:g}", "HOME": home.name,
           "XDG_CONFIG_HOME": os.path.join(home.name, ".config")}
    for var in ("FOLIO_ENDPOINT", "http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"):
        env.pop(var, None)
    print(f"folio from {a.src}, FOLIO_TIMEOUT={a.timeout:g}, caps {a.cap} MB / {a.kill:g} s"
          f"{', through the hostile server as HTTP_PROXY' if a.proxy else ''}\n")
    print("| server | command | ended | peak RSS MB | seconds | last line |\n|---|---|---|---|---|---|")
    for mode in modes:
        with tempfile.TemporaryDirectory(prefix="hostile-") as tmp:
            fresh, built = Path(tmp) / "fresh", Path(tmp) / "built"
            for root in (fresh, built):
                root.mkdir()
                for name, text in DOCS.items():
                    (root / name).write_text(text)
            port = free_port()
            url = f"http://127.0.0.1:{port}/v1/embeddings"
            # an index with vectors whose recorded endpoint the hostile server then takes over
            good = fake_server(dim=64)
            subprocess.run([sys.executable, "-m", "folio", "index", "--endpoint", good.url], cwd=built, env=env,
                           check=True, capture_output=True)
            good.stop()
            import sqlite3

            with sqlite3.connect(built / ".folio" / "index.db") as c:
                c.execute("UPDATE meta SET value = ? WHERE key = 'endpoint'", (url,))
            c.close()
            srv = hostile(mode, free_port() if a.proxy else port)
            run_env = {**env, "HTTP_PROXY": srv.args[-1].join(("http://127.0.0.1:", ""))} if a.proxy else env
            try:
                for name, args, cwd in (("index", ["index", "--endpoint", url], fresh),
                                        ("query", ["query", "kettles", "--json"], built)):
                    code, mb, secs, last = run(args, cwd, run_env, a.cap, a.kill)
                    last = last.replace("|", "\\|")[:160]
                    print(f"| {mode} | {name} | {code} | {mb:.0f} | {secs:.1f} | {last} |", flush=True)
            finally:
                srv.kill()
                srv.wait()
    home.cleanup()


if __name__ == "__main__":
    main()
