"""Line ranges while files are being edited: an editor rewrites a corpus's files in a loop, the ways
editors and tools do, while folio answers from it; every row handed out as `current` is checked
against the versions of its file live while the command ran. It prints counts; it is not a test.

    python bench/edit_race.py [--seconds 120] [--workers 2] [--pace 0.05] [--llama BIN]
        [--no-mcp] [--no-http] [--http-clients N] [--no-watch] [--kill-watch S] [--delay-ms MS]
        [--kinds git,tick,...] [--seed N] [--keep] [--out FILE.json] [--record]

The editor (one thread) picks a file and an edit at random, one file per kind of edit: `inplace`
(truncate, then write in two halves), `atomic` (a temporary file renamed over it), `append` (a
section added at the end), `sed` (`sed -i`: a line inserted, deleted or a heading renamed),
`git` (`git checkout REV -- git.md`, among three committed versions), `recreate` (deleted, then
written anew a moment later), `insert` (a section inserted above the others, every line below it
moving, or taken out again), `samemtime` (other bytes of the same size, the modification time set
back: `touch -d`), `tick` (two writes of one size within one clock tick), `crlf` (CRLF line ends, a
section inserted above), `front` (the frontmatter grown or shrunk: every section moves, no text
changes), `rename` (moved to another name and back). Each version's bytes are logged with the
window it was live in, the states between an edit's start and end included (an empty file, half
of it, no file).

Meanwhile: `folio query` (`--json` and text, every mode, some `--no-refresh`), `folio show` of a
row just returned (given the row's sha and trail), `folio ls --json` and `folio similar FILE --json`, `--workers` of them at once;
`folio index --watch`; `folio mcp` (stdio) and `folio mcp --http` answering the same four tools
from one client each (`--http-clients` for more); against tests/fakeserver.py, or the real
llama-server with `--llama`.

The oracle: a row marked `current` is *silently wrong* when no version of its file live at some
moment between the command's start and end has, in folio's own parse of it, a record starting at
the row's first line and one ending at its last with the row's trail as their common trail. `strict`
also asks that version's SHA-256 to begin with the row's `citation.sha`. A `current` document of
`ls` must carry the title and frontmatter of such a version (`samemtime` excepted: `folio ls`
judges a file by its size and mtime, as `folio index` does: docs/freshness.md, "The limit"). A
`show` must print the lines of such a version. `stale` and `missing` rows are honest and counted.
An error of a good question counts too, unless it is one a race may honestly give (the file is
gone, not indexed yet, has no vector yet, is shorter than the range now); so does a traceback in
any output. After the editor stops: within 30 s a `--no-refresh` query's rows for each file are
`current` and right (the watcher caught up); then `folio status`, `folio index` and a query must
still work.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import hashlib
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

HERE = str(Path(__file__).resolve().parent)
sys.path.insert(0, HERE)
import common  # noqa: E402

sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]  # `import mcp` is the SDK's
REPO = common.REPO
sys.path.insert(0, str(REPO))

INF = float("inf")
KINDS = ["inplace", "atomic", "append", "sed", "git", "recreate", "insert", "samemtime", "tick", "crlf",
         "front", "rename"]
WORDS = ["harbour", "lantern", "orchard", "granite", "meadow", "compass", "falcon", "glacier", "thimble",
         "velvet", "quarry", "saddle", "walnut", "ember", "pylon", "tundra", "beacon", "cobalt"]
# Errors a race may honestly give (the file is gone, not indexed yet, has no vector yet, shorter than the
# range now); any other error of a good question is counted as one.
HONEST = ("no longer exists", "is not in the index", "have no vector yet", "does not exist", "no such file",
          "holds no indexed section", "lies past the end", "holds no section", "changed since the query row")


# ------------------------------------------------------------------ versions and the oracle

class Versions:
    """Per file, every version with the window it was live in (monotonic seconds)."""

    def __init__(self, root: Path):
        self.root = root
        self.lock = threading.Lock()
        self.by_path: dict[str, list[list]] = collections.defaultdict(list)  # [bytes|None, from, to]
        self.inflight: float | None = None  # when the edit under way began (not logged yet)

    def set(self, path: str, content: bytes | None, t_start: float, t_end: float, between=()) -> None:
        """The file went from its last version to `content` during [t_start, t_end], by way of `between`."""
        with self.lock:
            vs = self.by_path[path]
            if vs and vs[-1][2] == INF:
                vs[-1][2] = t_end
            vs += [[mid, t_start, t_end] for mid in between]
            vs.append([content, t_start, INF])

    def live(self, path: str, t0: float, t1: float) -> list[bytes]:
        """The versions live at some moment of [t0, t1]; an edit that began before t1 is waited for."""
        end = time.monotonic() + 30
        while time.monotonic() < end:
            since = self.inflight
            if since is None or since > t1:
                break
            time.sleep(0.002)
        with self.lock:
            return [c for c, a, b in self.by_path.get(path, []) if a <= t1 and b >= t0 and c is not None]

    def last(self, path: str) -> bytes | None:
        with self.lock:
            vs = self.by_path.get(path)
            return vs[-1][0] if vs else None


_PARSED: dict[bytes, object] = {}


def parsed(content: bytes):
    """folio's own parse of a version (the records an index run makes of those bytes)."""
    from folio.readahead import parse_bytes

    if content not in _PARSED:
        _PARSED[content] = parse_bytes(content, 8000).document
    return _PARSED[content]


def common_trail(recs) -> tuple:
    trail = tuple(recs[0].trail)
    for r in recs[1:]:
        n = 0
        while n < min(len(trail), len(r.trail)) and trail[n] == r.trail[n]:
            n += 1
        trail = trail[:n]
    return trail


def names_section(content: bytes, start: int, end: int, trail) -> bool:
    """Whether lines start-end of this version are records of it (merged rows: touching ones) with
    `trail` their common trail (None: any)."""
    doc = parsed(content)
    if doc is None:
        return False
    recs = list(doc.records)
    for i, r in enumerate(recs):
        if r.start != start:
            continue
        for j in range(i, len(recs)):
            if recs[j].end == end and (trail is None or common_trail(recs[i:j + 1]) == tuple(trail)):
                return True
            if recs[j].end > end:
                break
    return False


def kind_of(path: str) -> str:
    return Path(path).stem.split("-")[0]


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.rows = collections.Counter()  # (surface, kind, freshness)
        self.wrong: list[dict] = []
        self.strict: list[dict] = []
        self.errors: list[dict] = []
        self.commands = collections.Counter()
        self.notes = collections.Counter()

    def add(self, surface: str, kind: str, freshness: str) -> None:
        with self.lock:
            self.rows[(surface, kind, freshness)] += 1

    def fail(self, where: list, item: dict) -> None:
        with self.lock:
            where.append(item)

    def note(self, key: str) -> None:
        with self.lock:
            self.notes[key] += 1

    def error(self, ctx: dict, message: str) -> None:
        """A failed command: counted unless a race may honestly give it."""
        if any(h in message for h in HONEST) and "damaged" not in message and "Traceback" not in message:
            self.note("honest error: " + re.sub(r"\d+", "N", message.strip().splitlines()[-1])[:100])
        else:
            self.fail(self.errors, {**ctx, "error": message[-3000:]})


def check_rows(tally: Tally, versions: Versions, surface: str, rows: list[dict], t0: float, t1: float,
               ctx: dict) -> None:
    for r in rows:
        kind = kind_of(r["path"])
        tally.add(surface, kind, r["freshness"])
        if r["freshness"] != "current":
            continue
        live = versions.live(r["path"], t0, t1)
        ok = [c for c in live if names_section(c, r["start"], r["end"], r["trail"])]
        sha = (r.get("citation") or {}).get("sha")
        item = {**ctx, "row": r, "kind": kind, "live": [c.decode(errors="replace") for c in live][:4]}
        if not ok:
            tally.fail(tally.wrong, item)
        elif sha and not any(hashlib.sha256(c).hexdigest().startswith(sha) for c in ok):
            tally.fail(tally.strict, item)


def check_show(tally: Tally, versions: Versions, obj: dict, row: dict, t0: float, t1: float, ctx: dict) -> None:
    """A show given the row's sha and trail (`since_row`): where it vouches for the lines (same, in_place,
    moved), they must be the row's section in a live version, whatever the freshness; not_found and
    changed (exit 1) are honest and counted. Without since_row, `current` lines must be a live version's."""
    path = obj["path"]
    tally.add("show", kind_of(path), obj["freshness"])
    since = obj.get("since_row")
    if since is not None:
        tally.note(f"show since_row: {since['state']}")
        if since["state"] in ("not_found", "changed"):
            return
    vouched = since is not None
    if obj["freshness"] != "current" and not vouched:
        return
    for c in versions.live(path, t0, t1):
        lines = c.decode().split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        shown = "\n".join(x.removesuffix("\r") for x in lines[obj["start"] - 1:obj["end"]])
        if shown == obj["text"] and (vouched or not obj["sha"] or hashlib.sha256(c).hexdigest().startswith(obj["sha"])):
            if names_section(c, obj["start"], obj["end"], row["trail"]):
                return
            if vouched:  # show said these are the row's section: they are not in any live version
                continue
            tally.note("show `current` of a row an index that moved since gave: other lines than the row's section")
            return
    tally.fail(tally.wrong, {**ctx, "show": obj, "kind": kind_of(path)})


def check_ls(tally: Tally, versions: Versions, obj: dict, t0: float, t1: float, surface: str, ctx: dict) -> None:
    for d in obj["documents"]:
        path = d["path"]
        tally.add(surface, kind_of(path), d["freshness"])
        if d["freshness"] != "current":
            continue
        fm = {k: str(v) for k, v in d["frontmatter"].items()}
        if any(parsed(c) is not None and parsed(c).title == d["title"]
               and {k: str(v) for k, v in parsed(c).frontmatter.items()} == fm for c in versions.live(path, t0, t1)):
            continue
        if kind_of(path) == "samemtime":
            tally.note("ls `current` for an edit that kept size and mtime (the documented limit)")
        else:
            tally.fail(tally.wrong, {**ctx, "doc": d, "kind": kind_of(path)})


# ------------------------------------------------------------------ the corpus and the editor

def doc(kind: str, gen: int, rng: random.Random, n: int | None = None) -> str:
    out = [f"---\nkind: {kind}\ngen: {gen}\n---\n# {kind} notes g{gen}\n\nIntro for {kind} {rng.choice(WORDS)}.\n"]
    for s in range(n or rng.randint(2, 6)):
        w = rng.sample(WORDS, 3)
        out.append(f"\n## {kind} {w[0]} s{s} g{gen}\n\n")
        out += [f"The {w[1]} of {kind} meets the {w[2]} {rng.choice(WORDS)} near kw{kind}.\n"
                for _ in range(rng.randint(1, 5))]
        if rng.random() < 0.3:
            out.append(f"\n### {kind} detail {w[2]} g{gen}\n\nDetail line about {w[0]} kw{kind}.\n")
    return "".join(out)


def fit(text: str, size: int) -> bytes | None:
    """`text` padded to `size` bytes by a last section of short lines of words (no record long enough
    for a server's token limit to divide it: the oracle divides by folio's character budget only),
    or None when it does not fit."""
    room = size - len(text.encode()) - len("\n## pad\n\n")
    if room < 1:
        return None
    lines = []
    while room > 0:
        n = min(room, 64)
        lines.append(("padding " * 8)[: n - 1] + "\n")
        room -= n
    return (text + "\n## pad\n\n" + "".join(lines)).encode()


class Editor(threading.Thread):
    def __init__(self, root: Path, versions: Versions, seed: int, stop: threading.Event, pace: float,
                 kinds: list[str]):
        super().__init__(daemon=True)
        self.root, self.versions, self.stop, self.pace, self.kinds = root, versions, stop, pace, kinds
        self.rng = random.Random(seed)
        self.gen = collections.Counter()
        self.edits = collections.Counter()
        self.git_revs: list[str] = []
        self.error: BaseException | None = None

    def new(self, kind: str, **kw) -> bytes:
        self.gen[kind] += 1
        return doc(kind, self.gen[kind], self.rng, **kw).encode()

    def setup(self) -> None:
        for kind in KINDS:
            data = self.new(kind)
            (self.root / f"{kind}.md").write_bytes(data)
            self.versions.set(f"{kind}.md", data, 0.0, 0.0)
        git = ["git", "-c", "user.name=race", "-c", "user.email=race@localhost"]
        subprocess.run([*git, "init", "-q"], cwd=self.root, check=True)
        for _ in range(3):
            (self.root / "git.md").write_bytes(self.new("git"))
            subprocess.run([*git, "add", "git.md"], cwd=self.root, check=True)
            subprocess.run([*git, "commit", "-qm", "a version"], cwd=self.root, check=True)
            self.git_revs.append(subprocess.run([*git, "rev-parse", "HEAD"], cwd=self.root, capture_output=True,
                                                text=True, check=True).stdout.strip())
        self.versions.set("git.md", (self.root / "git.md").read_bytes(), 0.0, 0.0)

    def write_inplace(self, path: Path, data: bytes, split: bool = True) -> None:
        """Truncated, then written (in two halves: an editor writing as it goes)."""
        t0 = time.monotonic()
        with open(path, "r+b" if path.exists() else "wb") as fh:
            fh.truncate(0)
            fh.flush()
            if split:
                fh.write(data[: len(data) // 2])
                fh.flush()
                time.sleep(self.rng.random() * 0.003)
                fh.write(data[len(data) // 2:])
            else:
                fh.write(data)
        self.versions.set(path.name, data, t0, time.monotonic(), between=[b"", data[: len(data) // 2]])

    def replace(self, path: Path, data: bytes) -> None:
        """A temporary file (a name folio skips) renamed over it."""
        tmp = self.root / f".{path.name}.swp"
        tmp.write_bytes(data)
        t0 = time.monotonic()
        os.replace(tmp, path)
        self.versions.set(path.name, data, t0, time.monotonic())

    def edit(self, kind: str) -> None:
        path, rel, rng = self.root / f"{kind}.md", f"{kind}.md", self.rng
        if kind == "inplace":
            self.write_inplace(path, self.new(kind))
        elif kind == "atomic":
            self.replace(path, self.new(kind))
        elif kind == "append":
            old = self.versions.last(rel)
            if old.count(b"\n## ") > 9:
                self.replace(path, self.new(kind))
            else:
                self.gen[kind] += 1
                add = f"\n## append {rng.choice(WORDS)} g{self.gen[kind]}\n\nAppended {rng.choice(WORDS)} kwappend.\n"
                t0 = time.monotonic()
                with open(path, "ab") as fh:
                    fh.write(add.encode())
                self.versions.set(rel, old + add.encode(), t0, time.monotonic())
        elif kind == "sed":
            old = self.versions.last(rel)
            n = rng.randint(6, max(6, old.count(b"\n") - 1))
            self.gen[kind] += 1
            g = self.gen[kind]
            script = rng.choice([f"{n}i\\\nInserted line {g} kwsed.", f"{n}d",
                                 f"s/^## sed \\([a-z]*\\)/## sed \\1 x{g}/",
                                 f"{n}a\\\n\\\n## sed inserted g{g}\\\n\\\nBody kwsed."])
            t0 = time.monotonic()
            subprocess.run(["sed", "-i", script, str(path)], check=True)
            data = path.read_bytes()
            self.versions.set(rel, data, t0, time.monotonic())
            if len(data) > 6000 or data.count(b"\n") < 8:
                self.write_inplace(path, self.new(kind), split=False)
        elif kind == "git":
            t0 = time.monotonic()
            subprocess.run(["git", "checkout", "-q", rng.choice(self.git_revs), "--", "git.md"], cwd=self.root,
                           check=True)
            self.versions.set(rel, path.read_bytes(), t0, time.monotonic(), between=[None, b""])
        elif kind == "recreate":
            data = self.new(kind)
            t0 = time.monotonic()
            path.unlink()
            self.versions.set(rel, None, t0, time.monotonic())
            time.sleep(rng.random() * 0.3)
            t0 = time.monotonic()
            path.write_bytes(data)
            self.versions.set(rel, data, t0, time.monotonic(), between=[b""])
        elif kind == "insert":
            text = self.versions.last(rel).decode()
            self.gen[kind] += 1
            if "## insert above" in text and rng.random() < 0.4:
                text = re.sub(r"\n## insert above[^\n]*\n\n[^\n]*\n(?:[^\n#][^\n]*\n)*", "\n", text, count=1)
            else:
                body = "".join(f"Line {i} above kwinsert {rng.choice(WORDS)}.\n" for i in range(rng.randint(1, 6)))
                i = text.index("\n## ") if "\n## " in text else len(text)
                text = text[:i] + f"\n## insert above g{self.gen[kind]}\n\n{body}" + text[i:]
            self.write_inplace(path, text.encode() if len(text) < 5000 else self.new(kind), split=False)
        elif kind == "samemtime":
            old, st = self.versions.last(rel), path.stat()
            data = next((d for d in (fit(doc(kind, self.gen[kind] + 1, rng), len(old)) for _ in range(100))
                         if d is not None and d != old), None)
            if data is None:  # no room: grow it once
                self.write_inplace(path, self.new(kind, n=8), split=False)
                return
            self.gen[kind] += 1
            t0 = time.monotonic()
            with open(path, "r+b") as fh:
                fh.write(data)
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # `touch -d` back to the time it had
            self.versions.set(rel, data, t0, time.monotonic())
        elif kind == "tick":
            a, b = (fit(doc(kind, self.gen[kind] + k, rng), 1800) for k in (1, 2))
            if a is None or b is None:
                return
            self.gen[kind] += 2
            t0 = time.monotonic()
            with open(path, "r+b") as fh:  # two writes of one size, microseconds apart: one clock tick
                fh.write(a)
                fh.flush()
                t1 = time.monotonic()
                fh.seek(0)
                fh.write(b)
            self.versions.set(rel, a, t0, t1)
            self.versions.set(rel, b, t1, time.monotonic())
        elif kind == "crlf":
            text = self.new(kind).decode()
            if rng.random() < 0.5:
                i = text.index("\n## ")
                text = text[:i] + f"\n## crlf above g{self.gen[kind]}\n\nAbove kwcrlf.\n" + text[i:]
            self.write_inplace(path, text.replace("\n", "\r\n").encode(), split=False)
        elif kind == "front":
            body = self.versions.last(rel).decode().split("---\n", 2)[2]
            keys = "".join(f"k{i}: v{rng.randint(0, 9)}\n" for i in range(rng.randint(0, 8)))
            self.replace(path, f"---\nkind: front\n{keys}---\n{body}".encode())
        elif kind == "rename":
            here = path if path.exists() else self.root / "rename-moved.md"
            there = self.root / ("rename-moved.md" if here == path else "rename.md")
            data = self.versions.last(here.name)
            if rng.random() < 0.3:  # written first, then moved
                data = self.new(kind)
                now = time.monotonic()
                here.write_bytes(data)
                self.versions.set(here.name, data, now, time.monotonic())
            t0 = time.monotonic()
            os.rename(here, there)
            t1 = time.monotonic()
            self.versions.set(here.name, None, t0, t1)
            self.versions.set(there.name, data, t0, t1)
        self.edits[kind] += 1

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self.versions.inflight = time.monotonic()
                try:
                    self.edit(self.rng.choice(self.kinds))
                finally:
                    self.versions.inflight = None
                time.sleep(self.rng.random() * self.pace)
        except BaseException as e:  # noqa: BLE001 - reported at the end
            self.error = e


# ------------------------------------------------------------------ the commands

class Cli:
    def __init__(self, root: Path, env: dict):
        self.root, self.env = root, env

    def run(self, *args, timeout: float = 120) -> tuple[subprocess.CompletedProcess, float, float]:
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "folio", *args], cwd=self.root, env=self.env,
                           capture_output=True, text=True, timeout=timeout)
        return r, t0, time.monotonic()


TEXT_ROW = re.compile(r"^#\d+\s+\S+\s+(?P<ref>.+?):(?P<start>\d+)-(?P<end>\d+)"
                      r"(?: \((?P<fresh>stale|missing)\))?(?:\s+\[.*\])?$")


def text_rows(out: str) -> list[dict]:
    """The rows of `folio query`'s text output (a trail in parentheses: any trail)."""
    rows, lines = [], out.splitlines()
    for i, line in enumerate(lines):
        m = TEXT_ROW.match(line)
        if m:
            trail = re.sub(r"\s+\(\d+ sections\)$", "", lines[i + 1].strip() if i + 1 < len(lines) else "")
            rows.append({"path": m["ref"], "start": int(m["start"]), "end": int(m["end"]),
                         "freshness": m["fresh"] or "current",
                         "trail": None if trail.startswith("(") else trail.split(" > ")})
    return rows


def question(rng: random.Random) -> str:
    kind = rng.choice(KINDS)
    return f"{kind} {rng.choice(WORDS)} kw{kind}" if rng.random() < 0.7 else f"{rng.choice(WORDS)} {rng.choice(WORDS)}"


def traceback_in(r: subprocess.CompletedProcess) -> bool:
    return "Traceback" in r.stderr or "Traceback" in r.stdout


def cli_worker(cli: Cli, versions: Versions, tally: Tally, stop: threading.Event, seed: int, shown: list) -> None:
    rng = random.Random(seed)
    while not stop.is_set():
        pick = rng.random()
        if pick < 0.55:
            text = pick >= 0.45
            args = ["query", question(rng), "-l", str(rng.choice([3, 5, 8]))] + ([] if text else ["--json"])
            if rng.random() < 0.3:
                args += ["--mode", rng.choice(["lexical", "semantic", "hybrid"])]
            if rng.random() < 0.2:
                args.append("--no-refresh")
            r, t0, t1 = cli.run(*args)
            tally.commands["cli query" + (" (text)" if text else "")] += 1
            if r.returncode != 0 or traceback_in(r):
                tally.fail(tally.errors, {"args": args, "rc": r.returncode, "error": r.stderr[-3000:]})
                continue
            rows = text_rows(r.stdout) if text else json.loads(r.stdout)["results"]
            check_rows(tally, versions, "cli query" + (" (text)" if text else ""), rows, t0, t1, {"args": args})
            if not text:
                shown[:] = [row for row in rows if row["freshness"] == "current"][:3]
        elif pick < 0.7:
            if not shown:
                continue
            row = rng.choice(shown)
            args = ["show", f"{row['path']}:{row['start']}-{row['end']}", "--json", "--sha", row["citation"]["sha"],
                    "--trail", json.dumps(row["trail"])]
            r, t0, t1 = cli.run(*args)
            tally.commands["cli show"] += 1
            if traceback_in(r) or not r.stdout:
                tally.error({"args": args, "rc": r.returncode}, r.stderr)
                continue
            check_show(tally, versions, json.loads(r.stdout), row, t0, t1, {"args": args})
        elif pick < 0.85:
            r, t0, t1 = cli.run("ls", "--json")
            tally.commands["cli ls"] += 1
            if r.returncode != 0 or traceback_in(r):
                tally.fail(tally.errors, {"args": ["ls"], "rc": r.returncode, "error": r.stderr[-3000:]})
                continue
            check_ls(tally, versions, json.loads(r.stdout), t0, t1, "cli ls", {"args": ["ls"]})
        else:
            args = ["similar", f"{rng.choice(KINDS)}.md", "--json", "-l", "5"]
            r, t0, t1 = cli.run(*args)
            tally.commands["cli similar"] += 1
            if r.returncode != 0 or traceback_in(r):
                tally.error({"args": args, "rc": r.returncode}, r.stderr)
                continue
            check_rows(tally, versions, "cli similar", json.loads(r.stdout)["results"], t0, t1, {"args": args})


def mcp_worker(name: str, connect, versions: Versions, tally: Tally, stop: threading.Event, seed: int) -> None:
    rng = random.Random(seed)

    def error_of(res) -> str:
        return "\n".join(getattr(c, "text", "") for c in res.content)

    async def loop():
        async with connect() as c:
            shown: list = []
            while not stop.is_set():
                pick = rng.random()
                t0 = time.monotonic()
                if pick < 0.55:
                    args = {"query": question(rng), "limit": rng.choice([3, 5, 8])}
                    if rng.random() < 0.2:
                        args["no_refresh"] = True
                    res = await c.call_tool("query", args)
                    t1 = time.monotonic()
                    tally.commands[f"{name} query"] += 1
                    if res.is_error:
                        tally.fail(tally.errors, {"tool": name, "args": args, "error": error_of(res)})
                        continue
                    rows = res.structured_content["results"]
                    check_rows(tally, versions, f"{name} query", rows, t0, t1, {"tool": name, "args": args})
                    shown = [r for r in rows if r["freshness"] == "current"][:3]
                elif pick < 0.7 and shown:
                    row = rng.choice(shown)
                    args = {"ref": f"{row['path']}:{row['start']}-{row['end']}", "sha": row["citation"]["sha"],
                            "trail": row["trail"]}
                    res = await c.call_tool("show", args)
                    t1 = time.monotonic()
                    tally.commands[f"{name} show"] += 1
                    if res.is_error and (res.structured_content or {}).get("since_row"):  # not_found, changed
                        check_show(tally, versions, res.structured_content, row, t0, t1, {"tool": name, "args": args})
                        continue
                    if res.is_error:
                        tally.error({"tool": name, "args": args}, error_of(res))
                        continue
                    check_show(tally, versions, res.structured_content, row, t0, t1, {"tool": name, "args": args})
                elif pick < 0.85:
                    res = await c.call_tool("ls", {})
                    t1 = time.monotonic()
                    tally.commands[f"{name} ls"] += 1
                    if res.is_error:
                        tally.fail(tally.errors, {"tool": name, "args": "ls", "error": error_of(res)})
                        continue
                    check_ls(tally, versions, res.structured_content, t0, t1, f"{name} ls", {"tool": name})
                else:
                    args = {"ref": f"{rng.choice(KINDS)}.md", "limit": 5}
                    res = await c.call_tool("similar", args)
                    t1 = time.monotonic()
                    tally.commands[f"{name} similar"] += 1
                    if res.is_error:
                        tally.error({"tool": name, "args": args}, error_of(res))
                        continue
                    check_rows(tally, versions, f"{name} similar", res.structured_content["results"], t0, t1,
                               {"tool": name, "args": args})
                await asyncio.sleep(rng.random() * 0.05)

    try:
        asyncio.run(loop())
    except BaseException as e:  # noqa: BLE001 - reported at the end
        tally.fail(tally.errors, {"tool": name, "error": repr(e)[:3000]})


def stdio_connect(root: Path, env: dict):
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", "folio", "mcp"], cwd=str(root), env=env)
    return lambda: Client(params, read_timeout_seconds=120)


def http_connect(url: str):
    @contextlib.asynccontextmanager
    async def connect():
        import httpx2
        from mcp.client import Client
        from mcp.client.streamable_http import streamable_http_client

        async with httpx2.AsyncClient(timeout=120) as hc, \
                Client(streamable_http_client(url, http_client=hc), read_timeout_seconds=120) as client:
            yield client

    return connect


# ------------------------------------------------------------------ after the editor stops

def converge(cli: Cli, versions: Versions, deadline_s: float = 30.0) -> dict:
    """Seconds until a `--no-refresh` query for each file's words returns its rows all `current` and right
    (the watcher's doing); where the watcher never catches up (an edit that kept size and mtime: the
    documented limit), whether a plain query's rows (it refreshes them) are `current` and right."""
    def right(*flags: str) -> tuple[bool, list]:
        r, _, _ = cli.run("query", f"{kind} kw{kind}", "--json", "-l", "8", *flags)
        rows = [x for x in (json.loads(r.stdout)["results"] if r.returncode == 0 else [])
                if kind_of(x["path"]) == kind]
        content = versions.last(rows[0]["path"]) if rows else None
        return bool(rows) and all(x["freshness"] == "current" and content is not None
                                  and names_section(content, x["start"], x["end"], x["trail"]) for x in rows), rows

    out = {}
    for kind in KINDS:
        start = time.monotonic()
        while True:
            ok, rows = right("--no-refresh")
            if ok:
                out[kind] = round(time.monotonic() - start, 2)
                break
            if time.monotonic() - start > deadline_s:
                seen = [(x["start"], x["end"], x["freshness"]) for x in rows]
                out[kind] = (f"not within {deadline_s:.0f} s ({seen}); a plain query's rows are "
                             + ("current and right" if right()[0] else "NOT current and right"))
                break
            time.sleep(0.5)
    return out


def integrity(cli: Cli) -> list[str]:
    problems = []
    for args in (("status", "--json"), ("index", "--json"), ("query", "inplace kwinplace", "--json")):
        r, _, _ = cli.run(*args)
        if r.returncode != 0 or traceback_in(r):
            problems.append(f"folio {' '.join(args)}: exit {r.returncode}: {r.stderr[-500:]}")
        elif args[0] == "query" and not json.loads(r.stdout)["results"]:
            problems.append("a query after the run found nothing")
    return problems


# ------------------------------------------------------------------ main

def stop_proc(proc: subprocess.Popen, timeout: float = 20) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(a) -> tuple[subprocess.Popen, str]:
    if a.llama:
        port = free_port()
        proc = subprocess.Popen([a.llama, "-m", str(common.MODEL), "--embeddings", "-t", "1", "-tb", "1", "--host",
                                 "127.0.0.1", "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        common.wait_health(f"http://127.0.0.1:{port}")
        return proc, f"http://127.0.0.1:{port}/v1/embeddings"
    proc = subprocess.Popen([sys.executable, str(common.FAKESERVER), "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    base = proc.stdout.readline().decode().strip()
    if a.delay_ms:
        req = urllib.request.Request(base + "/control", method="POST", data=json.dumps({"delay_ms": a.delay_ms}).encode(),
                                     headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=10).read()
    return proc, base + "/v1/embeddings"


def report(a, tally: Tally, editor: Editor, conv: dict, problems: list[str], work: Path) -> list[tuple[str, str]]:
    print(f"edit_race: {a.seconds:.0f} s, {'llama-server' if a.llama else 'fake server'}, seed {a.seed}, "
          f"{common.load()}; work dir {work}")
    print("edits:", dict(editor.edits), f"editor failed: {editor.error!r}" if editor.error else "")
    print("commands:", dict(tally.commands))
    print(f"{'rows (current/stale/missing)':24s}" + "".join(f"{k:>15s}" for k in KINDS))
    for s in sorted({s for s, _, _ in tally.rows}):
        print(f"{s:24s}" + "".join(
            f"{'/'.join(str(tally.rows[(s, k, f)]) for f in ('current', 'stale', 'missing')):>15s}" for k in KINDS))
    current = collections.Counter()
    for (_s, k, f), n in tally.rows.items():
        if f == "current":
            current[k] += n
    print("current rows checked per kind:", dict(current))
    print(f"silently wrong: {len(tally.wrong)}; wrong against the row's own sha: {len(tally.strict)}; "
          f"errors: {len(tally.errors)}")
    for key, n in tally.notes.most_common(12):
        print(f"  x{n}: {key}")
    print("convergence (s after the editor stopped):", conv or "no watcher")
    print("afterwards:", problems or "status, index and a query work")
    for item in tally.wrong[:3] + tally.strict[:2] + tally.errors[:3]:
        print(json.dumps(item, indent=1)[:3000])
    slow = [k for k, v in conv.items() if isinstance(v, str)]
    unfixed = [k for k, v in conv.items() if isinstance(v, str) and v.endswith("NOT current and right")]
    return [("seconds, server", f"{a.seconds:.0f} s, {'llama-server' if a.llama else 'fake server'}"),
            ("edits", ", ".join(f"{k} {n}" for k, n in sorted(editor.edits.items()))),
            ("commands", ", ".join(f"{k} {n}" for k, n in sorted(tally.commands.items()))),
            ("`current` rows checked", ", ".join(f"{k} {n}" for k, n in sorted(current.items()))),
            ("silently wrong / wrong against its sha / errors", f"{len(tally.wrong)} / {len(tally.strict)} / "
                                                                f"{len(tally.errors)}"),
            ("watcher converged (30 s)", "every file" if conv and not slow else
             f"all but {', '.join(slow)} (a plain query's rows: {'NOT ' if unfixed else ''}current and right)"
             if conv else "-"),
            ("afterwards", "; ".join(problems) or "status, index and a query work")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--workers", type=int, default=2, help="CLI commands at once")
    ap.add_argument("--pace", type=float, default=0.05, help="the editor's longest pause between edits (s)")
    ap.add_argument("--llama", help="a llama-server binary: the real server instead of the fake one")
    ap.add_argument("--no-mcp", action="store_true", help="no `folio mcp` (stdio nor HTTP)")
    ap.add_argument("--no-http", action="store_true", help="no `folio mcp --http`")
    ap.add_argument("--http-clients", type=int, default=1, help="clients asking `folio mcp --http` at once")
    ap.add_argument("--no-watch", action="store_true", help="no `folio index --watch`")
    ap.add_argument("--kill-watch", type=float, default=0, help="SIGKILL the watcher every S s, and start it again")
    ap.add_argument("--delay-ms", type=float, default=0, help="the fake server's delay per request (a slow server)")
    ap.add_argument("--kinds", default=",".join(KINDS), help="the edits made (comma-separated)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--out", help="write every failure found as JSON here")
    ap.add_argument("--record", action="store_true", help="append the counts to docs/benchmarks.md")
    a = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="folio-edit-race-"))
    root, home = work / "corpus", work / "home"
    root.mkdir()
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("FOLIO_")}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    server, url = start_server(a)
    procs: list[subprocess.Popen] = []
    threads: list[threading.Thread] = []
    stop = threading.Event()
    versions, tally = Versions(root), Tally()
    editor = Editor(root, versions, a.seed, stop, a.pace, a.kinds.split(","))
    conv: dict = {}
    logs = []

    def watch() -> subprocess.Popen:
        out, err = open(work / "watch.out", "a"), open(work / "watch.err", "a")  # noqa: SIM115 - closed at the end
        logs.extend([out, err])
        return subprocess.Popen([sys.executable, "-m", "folio", "index", "--watch"], cwd=root, env=env, stdout=out,
                                stderr=err, stdin=subprocess.DEVNULL)

    try:
        (root / "folio.yaml").write_text(f"endpoint: {url}\nmodel: race\n")
        (root / ".gitignore").write_text("*.swp\n")
        editor.setup()
        cli = Cli(root, env)
        r, _, _ = cli.run("index")
        if r.returncode != 0:
            raise SystemExit(f"the first folio index failed: {r.stderr}")
        if not a.no_watch:
            procs.append(watch())
        if not a.no_mcp:
            threads.append(threading.Thread(target=mcp_worker, daemon=True, args=(
                "mcp stdio", stdio_connect(root, env), versions, tally, stop, a.seed + 100)))
        if not a.no_mcp and not a.no_http:
            port = free_port()
            err = open(work / "http.err", "w")  # noqa: SIM115 - closed at the end
            logs.append(err)
            procs.append(subprocess.Popen([sys.executable, "-m", "folio", "mcp", "--http", "--port", str(port)],
                                          cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=err,
                                          stdin=subprocess.DEVNULL))
            end = time.monotonic() + 60
            while time.monotonic() < end:
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
                time.sleep(0.1)
            threads += [threading.Thread(target=mcp_worker, daemon=True, args=(
                "mcp http", http_connect(f"http://127.0.0.1:{port}/mcp"), versions, tally, stop, a.seed + 200 + k))
                for k in range(a.http_clients)]
        shown: list = []
        threads += [threading.Thread(target=cli_worker, daemon=True, args=(cli, versions, tally, stop, a.seed + w, shown))
                    for w in range(a.workers)]
        editor.start()
        for t in threads:
            t.start()
        started = killed = time.monotonic()
        while time.monotonic() - started < a.seconds and editor.is_alive():
            time.sleep(0.2)
            if a.kill_watch and procs and time.monotonic() - killed > a.kill_watch:
                killed = time.monotonic()
                procs[0].kill()
                procs[0].wait()
                procs[0] = watch()
                tally.note("the watcher killed (SIGKILL) and started again")
        stop.set()
        editor.join(30)
        for t in threads:
            t.join(180)
        if not a.no_watch:
            conv = converge(cli, versions)
        for p in procs:
            stop_proc(p)
        problems = integrity(cli)
        for name in ("watch.err", "http.err"):
            if (work / name).exists() and "Traceback" in (work / name).read_text():
                problems.append(f"{name} holds a traceback: {(work / name).read_text()[-2000:]}")
    finally:
        stop.set()
        for p in procs:
            stop_proc(p)
        stop_proc(server)
        for f in logs:
            f.close()
    rows = report(a, tally, editor, conv, problems, work)
    if a.out:
        Path(a.out).write_text(json.dumps({"wrong": tally.wrong, "strict": tally.strict, "errors": tally.errors},
                                          indent=1))
    if a.record:
        common.record(f"bench/edit_race.py --seconds {a.seconds:.0f} --seed {a.seed}"
                      + (" --llama" if a.llama else ""), rows, note=common.load())
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    unfixed = any(isinstance(v, str) and v.endswith("NOT current and right") for v in conv.values())
    return 1 if tally.wrong or tally.strict or tally.errors or problems or unfixed else 0


if __name__ == "__main__":
    sys.exit(main())
