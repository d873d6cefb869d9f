"""Peak memory and time of folio against hostile storage (issue 30, section 2).

Each case is met by the commands a user would run next, each a fresh process reaped with wait4 (its
own peak RSS and wall seconds):

- *full disk*: `.folio` is a tmpfs of a few hundred KiB in a private mount namespace (`unshare -m`,
  root only); the first `folio index` fills it (where depends on the shape: the lexical segment's
  arrays, the matrix, SQLite's log), then `folio query --mode semantic` asks what it holds;
- *hand-edited index.db*: one value edited with SQL (a frontmatter that is not a JSON object, a
  `records.start` that is not a number), then `status`, `query --where` and `index`;
- *another program's index.db* where `.folio` links (a SQLite file with a `photos` table): `index`
  and `index --rebuild`;
- *a killed run*: kill -9 of a first `folio index` mid-run; the time until the last process it
  started has ended (the walking child, the parse workers).

Prints a Markdown table: case, command, exit code (or "traceback"), peak RSS MB, seconds, the last
line folio printed.

    sudo python bench/hostile_storage.py [--src DIR]

`--src DIR`: run the folio package found in DIR (e.g. `git archive` of another commit) instead of
this checkout's: the before column.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, fake_server, measure  # noqa: E402

FULL = {  # shape -> (dimension, files, sections a file, words a section, tmpfs size)
    "full disk, big lexical segments": (16, 100, 4, 200, "1m"),
    "full disk, 4 KiB vectors": (1024, 100, 4, 5, "2m"),
    "full disk, many small commits": (16, 300, 4, 5, "256k"),
}
EDITS = {
    "frontmatter '[1,2]'": "UPDATE files SET frontmatter = '[1,2]' WHERE path = 'n001.md'",
    "records.start 'abc'": "UPDATE records SET start = 'abc'",
}


def corpus(root: Path, files: int, sections: int, words: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        body = "\n\n".join(f"## Item {j}\n\nabout apples{i} and pears{j} " + " ".join(f"w{i}x{j}x{k}" for k in range(words))
                           for j in range(sections))
        (root / f"n{i:03}.md").write_text(f"---\nlevel: {i % 3}\n---\n# Note {i}\n\n{body}\n")
    return root


def row(case: str, command: str, m) -> None:
    text = m.stderr
    code = "traceback" if "Traceback" in text else str(m.rc)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    last = (lines[-1] if lines else "").replace("|", "\\|")[:150]
    print(f"| {case} | {command} | {code} | {m.rss / 2**20:.0f} | {m.wall:.2f} | {last} |", flush=True)


def full_disk(tmp: Path, env: dict, prefix: list[str]) -> None:
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("nsenter"):
        print("| full disk | - | skipped: needs root, unshare and nsenter | | | |")
        return
    for case, (dim, files, sections, words, size) in FULL.items():
        srv = fake_server(dim=dim)
        root = corpus(tmp / case.replace(" ", "-").replace(",", ""), files, sections, words)
        (root / ".folio").mkdir()
        holder = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sleep", "600"])
        try:
            time.sleep(0.3)
            ns = ["nsenter", "-t", str(holder.pid), "-m", "--"]
            subprocess.run([*ns, "mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(root / ".folio")], check=True)
            into = [*ns, "sh", "-c", 'cd "$0" && exec "$@"', str(root), *prefix]
            for label, command in (("index", ["index", "--endpoint", srv.url]),
                                   ("query --mode semantic", ["query", "apples3 pears2", "--mode", "semantic"])):
                row(case, label, measure([*into, *command], env=env, check=False, timeout=120))
        finally:
            holder.kill()
            holder.wait()
            srv.stop()


def hand_edits(tmp: Path, env: dict, prefix: list[str]) -> None:
    srv = fake_server(dim=16)
    try:
        for case, sql in EDITS.items():
            root = corpus(tmp / f"edit-{len(list(tmp.iterdir()))}", 60, 3, 5)
            measure([*prefix, "index", "--endpoint", srv.url], cwd=root, env=env)
            with sqlite3.connect(root / ".folio" / "index.db") as c:
                c.execute(sql)
            c.close()
            for label, command in (("status", ["status"]), ("index", ["index"]),
                                   ("query --where", ["query", "apples1", "--mode", "lexical", "--where", "level=1"])):
                row(f"hand-edited {case}", label, measure([*prefix, *command], cwd=root, env=env, check=False,
                                                          timeout=120))
    finally:
        srv.stop()


def foreign(tmp: Path, env: dict, prefix: list[str]) -> None:
    srv = fake_server(dim=16)
    try:
        root, cache = corpus(tmp / "foreign", 20, 2, 5), tmp / "cache"
        cache.mkdir()
        with sqlite3.connect(cache / "index.db") as c:
            c.execute("CREATE TABLE photos(id INTEGER PRIMARY KEY, name TEXT)")
            c.executemany("INSERT INTO photos(name) VALUES (?)", [(f"p{i}.jpg",) for i in range(1000)])
        c.close()
        before = (cache / "index.db").read_bytes()
        os.symlink(cache, root / ".folio")
        for label, command in (("index", ["index", "--endpoint", srv.url]),
                               ("index --rebuild", ["index", "--rebuild", "--endpoint", srv.url])):
            m = measure([*prefix, *command], cwd=root, env=env, check=False, timeout=120)
            row("another program's index.db" + ("" if (cache / "index.db").read_bytes() == before else " (CHANGED)"),
                label, m)
    finally:
        srv.stop()


def killed_run(tmp: Path, env: dict, prefix: list[str]) -> None:
    """kill -9 of a first run at several moments: how long after it the last process it started ran."""
    srv = fake_server(dim=64, delay_ms=30)
    try:
        for at in (0.1, 0.5, 1.0, 3.0):
            root = corpus(tmp / f"killed-{at}", 300, 6, 20)
            p = subprocess.Popen([*prefix, "index", "--endpoint", srv.url], cwd=root, stdout=subprocess.DEVNULL,
                                 env={**env, "FOLIO_PARSE_WORKERS": "2"}, stderr=subprocess.DEVNULL,
                                 start_new_session=True)
            t, started = time.monotonic(), set()
            while time.monotonic() - t < at:
                started |= _session(p.pid)
                time.sleep(0.005)
            p.kill()
            p.wait()
            t = time.monotonic()
            while _session(p.pid) and time.monotonic() - t < 60:
                time.sleep(0.005)
            print(f"| killed run (kill -9 at {at:g} s) | index | - | - | {time.monotonic() - t:.2f} | the last of the "
                  f"{len(started)} processes it started ended that many seconds after it |", flush=True)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
    finally:
        srv.stop()


def _session(sid: int) -> set[int]:
    """The live processes (not zombies) of session `sid` but its leader."""
    out = set()
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != sid:
            with contextlib.suppress(OSError):
                raw = Path(f"/proc/{d}/stat").read_text()
                fields = raw[raw.rindex(")") + 2:].split()
                if int(fields[3]) == sid and fields[0] != "Z":
                    out.add(int(d))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", type=Path, default=REPO, help="a checkout whose folio package to run")
    a = ap.parse_args()
    home = tempfile.TemporaryDirectory(prefix="hostile-home-")
    env = {**os.environ, "PYTHONPATH": str(a.src.resolve()), "HOME": home.name,
           "XDG_CONFIG_HOME": os.path.join(home.name, ".config")}
    env.pop("FOLIO_ENDPOINT", None)
    prefix = [sys.executable, "-m", "folio"]
    print(f"folio from {a.src}\n")
    print("| case | command | exit | peak RSS MB | seconds | last line |\n|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="hostile-storage-") as tmp:
        for part in (full_disk, hand_edits, foreign, killed_run):
            part(Path(tmp), env, prefix)
    home.cleanup()


if __name__ == "__main__":
    main()
