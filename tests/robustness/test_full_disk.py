"""A full disk (issue 30, section 2): `folio index` on a small filesystem ends with one sentence
saying what ran out, in which of folio's files, and what the index keeps; the next query tells the
truth about what the index holds (never that no server answered when one did), a query whose
refresh cannot write still answers, and once there is room a plain `folio index` finishes the job.

The filesystem is a real tmpfs of a few hundred KiB mounted at the corpus's `.folio`, in a private
mount namespace held by a sleeping process (`unshare -m`), so nothing is mounted where the rest of
the machine sees it; every folio command of a test runs inside it (`nsenter`). Needs root (or the
right to make a mount namespace): the tests skip, saying so, where it cannot be made.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from helpers import folio_command, write_tree

FULL = "no space left on the device (disk full) while writing "


class SmallDisk:
    """A tmpfs of `size` at `mountpoint`, seen only by the commands run through it."""

    def __init__(self, mountpoint: Path, size: str):
        self.mountpoint = mountpoint
        mountpoint.mkdir(parents=True, exist_ok=True)
        self.holder = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sleep", "3600"],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        mine = os.readlink("/proc/self/ns/mnt")
        deadline = time.monotonic() + 10
        while True:  # unshare has made its namespace once its pid's differs from ours
            try:
                if os.readlink(f"/proc/{self.holder.pid}/ns/mnt") != mine:
                    break
            except OSError:
                pass
            if self.holder.poll() is not None or time.monotonic() > deadline:
                why = self.holder.stderr.read().decode(errors="replace").strip() if self.holder.stderr else ""
                self.close()
                pytest.skip(f"no private mount namespace here (`unshare -m`: {why or 'it did not start'}), so no "
                            f"small filesystem to fill")
            time.sleep(0.01)
        r = self.sh(f'mount -t tmpfs -o size={size} tmpfs "$0"', str(mountpoint))
        if r.returncode != 0:
            self.close()
            pytest.skip(f"cannot mount a tmpfs here ({r.stderr.strip()}), so no small filesystem to fill")

    def sh(self, script: str, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["nsenter", "-t", str(self.holder.pid), "-m", "--", "sh", "-c", script, *args],
                              capture_output=True, text=True, timeout=60)

    def folio(self, *args, cwd: Path) -> subprocess.CompletedProcess:
        return subprocess.run(["nsenter", "-t", str(self.holder.pid), "-m", "--", "sh", "-c", 'cd "$0" && exec "$@"',
                               str(cwd), *folio_command(), *map(str, args)],
                              capture_output=True, text=True, timeout=120, env=dict(os.environ))

    def resize(self, size: str) -> None:
        r = self.sh(f'mount -o remount,size={size} "$0"', str(self.mountpoint))
        assert r.returncode == 0, r.stderr

    def fill(self) -> None:
        """Take what room is left with a file of the user's own beside folio's."""
        self.sh('dd if=/dev/zero of="$0/filler.bin" bs=4096 2>/dev/null; sync', str(self.mountpoint))

    def close(self) -> None:
        if self.holder.poll() is None:
            self.holder.kill()
        self.holder.wait()
        if self.holder.stderr:
            self.holder.stderr.close()


@pytest.fixture
def small_disk():
    if os.geteuid() != 0 or not (shutil.which("unshare") and shutil.which("nsenter")):
        pytest.skip("needs root with unshare and nsenter to mount a small tmpfs in a private mount namespace")
    made: list[SmallDisk] = []

    def make(mountpoint: Path, size: str) -> SmallDisk:
        d = SmallDisk(mountpoint, size)
        made.append(d)
        return d

    yield make
    for d in made:
        d.close()


def corpus(root: Path, files: int, sections: int, words: int) -> Path:
    """`files` notes of `sections` sections, each with `words` words found nowhere else (they make
    the lexical segments big) and `apples<i> pears<j>` to find it by."""
    return write_tree(root, {
        f"n{i:03}.md": f"# Note {i}\n\n" + "\n\n".join(
            f"## Item {j}\n\nabout apples{i} and pears{j} " + " ".join(f"w{i}x{j}x{k}" for k in range(words))
            for j in range(sections))
        for i in range(files)})


def one_sentence(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and "Error" not in r.stderr, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("folio: ")]
    assert len(lines) == 1, r.stderr
    return lines[0]


# (dimension, files, sections, words per section, disk size, the file that runs out of room)
CASES = {
    # big lexical segments, small vectors: the segment's arrays (np.save) meet the full disk
    "lexical segment": (16, 100, 4, 200, "1m", ".npy"),
    # 4 KiB a vector: the matrix does, after some batches were committed
    "matrix": (1024, 100, 4, 5, "2m", "vectors.1.f32"),
    # small everything, many commits: SQLite's log does
    "index.db": (16, 300, 4, 5, "256k", "index.db"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_full_disk_is_one_sentence_the_next_query_tells_the_truth_and_room_finishes_it(
        case, tmp_path, fake_server, small_disk):
    dim, files, sections, words, size, where = CASES[case]
    srv = fake_server(dim=dim)
    root = corpus(tmp_path / "c", files, sections, words)
    disk = small_disk(root / ".folio", size)
    for attempt in ("first run", "the next run, the disk still full"):
        line = one_sentence(disk.folio("index", "--endpoint", srv.url, cwd=root))
        assert line.startswith("folio: " + FULL + str(root / ".folio")), (attempt, line)
        named = line[len("folio: " + FULL):].split(";")[0]
        assert named.endswith(where) or named.split("/")[-1].startswith(where), (attempt, named)
        assert "run `folio index` again, which resumes where this run stopped" in line
    status = disk.folio("status", "--json", cwd=root)
    assert status.returncode == 0, status.stderr
    held = json.loads(status.stdout)
    if held["files"]:
        assert f"intact up to its last commit ({held['files']} files, {held['embedded']} of its" in line, line
    else:
        assert "no commit reached the disk, so the index holds nothing yet" in line, line
    r = disk.folio("query", "apples3 pears2", "--mode", "semantic", "--json", cwd=root)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    notices = json.loads(r.stdout)["notices"]
    assert not any("no embeddings server answered" in n for n in notices), notices  # one did, every time
    if held["embedded"]:
        assert json.loads(r.stdout)["mode"] == "semantic", notices
    else:
        assert any("holds no vectors yet (the last `folio index` stopped before it committed any)" in n
                   for n in notices), notices
    # with room, the plain command the sentence names finishes the index
    disk.resize("64m")
    r = disk.folio("index", cwd=root)
    assert r.returncode == 0, r.stderr
    held = json.loads(disk.folio("status", "--json", cwd=root).stdout)
    records = files * (sections + 1)  # and each title's own
    assert (held["files"], held["sections"], held["embedded"]) == (files, records, records)
    got = json.loads(disk.folio("query", "apples3 pears2", "--mode", "semantic", "--json", cwd=root).stdout)
    assert got["mode"] == "semantic" and not got["notices"], got
    got = json.loads(disk.folio("query", "apples3 pears2", "--mode", "lexical", "--json", cwd=root).stdout)
    assert got["results"][0]["path"] == "n003.md", got


def test_a_query_whose_refresh_meets_a_full_disk_still_answers(tmp_path, fake_server, small_disk):
    srv = fake_server(dim=16)
    root = corpus(tmp_path / "c", 20, 4, 5)
    disk = small_disk(root / ".folio", "4m")
    assert disk.folio("index", "--endpoint", srv.url, cwd=root).returncode == 0
    disk.fill()
    with open(root / "n003.md", "a") as fh:  # the query re-indexes it before answering: no room to
        fh.write("\n\n## Item 9\n\nabout apples3 and pears9 " + " ".join(f"new{k}" for k in range(3000)) + "\n")
    r = disk.folio("query", "apples3 pears2", "--mode", "lexical", "--json", cwd=root)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    got = json.loads(r.stdout)
    assert got["results"][0]["path"] == "n003.md" and got["results"][0]["freshness"] == "stale", got
    said = [n for n in got["notices"] if "could not be re-indexed" in n]
    assert len(said) == 1 and FULL + str(root / ".folio") in said[0], got["notices"]
    assert disk.sh('test -s "$0/filler.bin"', str(root / ".folio")).returncode == 0  # the user's file is left
