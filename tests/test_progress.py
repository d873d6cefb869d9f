"""`folio index` progress as a user sees it: a progress bar on a terminal (stderr a pty), a few plain
lines off one, an estimate when a long run starts, and a line that ends cleanly when the run is
stopped."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
import time
from pathlib import Path

from helpers import folio_command, free_port

SECTIONS = 40 * 24  # many_files(40, 23): 23 topics and a preamble-free title section per file


def many_files(root: Path, n_files: int = 40, per_file: int = 23) -> Path:
    for f in range(n_files):
        parts = [f"# File {f}\n"]
        for s in range(per_file):
            parts.append(f"\n## Topic {f}-{s}\n\nParagraph {f} {s} about widget{f}x{s} and gadget{s}.\n")
        (root / f"f{f:03d}.md").parent.mkdir(parents=True, exist_ok=True)
        (root / f"f{f:03d}.md").write_text("".join(parts))
    return root


def run_on_a_terminal(root: Path, endpoint: str, stop_when=None, timeout: float = 120, sig=signal.SIGTERM, cwd=None):
    """Run `folio index` with stderr on a pseudo-terminal; send it `sig` (SIGINT: Ctrl-C) once
    stop_when(screen) holds. (returncode, stdout, everything written to the terminal)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([*folio_command(), "index"], cwd=cwd or root, stdout=subprocess.PIPE, stderr=slave,
                            env={**os.environ, "FOLIO_ENDPOINT": endpoint},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    os.close(slave)
    screen, deadline, sent = b"", time.monotonic() + timeout, False
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the child closed its end
                    break
                if not chunk:
                    break
                screen += chunk
            elif proc.poll() is not None:
                break
            if stop_when and not sent and stop_when(screen.decode("utf-8", "replace")):
                proc.send_signal(sig)
                sent = True
    finally:
        os.close(master)
        if proc.poll() is None and time.monotonic() >= deadline:
            proc.kill()
    out = proc.stdout.read().decode()
    proc.stdout.close()
    return proc.wait(), out, screen.decode("utf-8", "replace")


BAR = re.compile(r"embedding sections\s+\[[#-]+\]\s+(\d+)/(\d+)\s+(\d+)%\s+(\d\d:\d\d:\d\d)\s+(\d+) sections/s")


def test_a_terminal_gets_a_bar_with_total_rate_and_eta_and_sigterm_ends_the_line(tmp_path, fake_server):
    srv = fake_server(dim=32, delay_ms=250)
    root = many_files(tmp_path / "c")
    # the bar moves as batches are committed (what it counts is what a stopped run keeps)
    code, out, screen = run_on_a_terminal(root, srv.url, stop_when=lambda s: len(BAR.findall(s)) >= 2)
    assert code == 130, screen
    assert "asking the embeddings server at" in screen and "tokens it takes in one input" in screen  # calibrating
    bars = BAR.findall(screen)
    assert len(bars) >= 2, screen
    done, total, pct, _eta, rate = map(lambda x: int(x) if x.isdigit() else x, bars[-1])
    assert 0 < done < total and abs(total - SECTIONS) <= SECTIONS // 4 and int(rate) > 0
    assert pct == int(100 * done / total)
    # stopped: the bar's line is ended before the last word, which stands on a line of its own
    assert "\r\nfolio: interrupted: " in screen and screen.rstrip("\r\n").endswith("what is left is read and embedded)")
    assert re.search(r"sections/s\x1b\[\?25h\r\n", screen), repr(screen[-300:])  # cursor shown again
    assert out == ""


KEPT = re.compile(r"folio: interrupted: the index keeps everything committed before the stop: (\d+) files?, "
                  r"(\d+) sections?, (\d+) of them with vectors; run `folio index` again to go on from there")


def test_ctrl_c_says_what_the_index_kept_and_the_next_run_embeds_only_the_rest(tmp_path, fake_server, run_folio):
    # Ctrl-C mid-run: the last line says what was kept (and how to go on), the same counts status gives;
    # it said only `folio: interrupted`, and a user could not tell whether the minutes spent were lost
    srv = fake_server(dim=32, delay_ms=250)
    root = many_files(tmp_path / "c")
    code, out, screen = run_on_a_terminal(root, srv.url, stop_when=lambda s: len(BAR.findall(s)) >= 2,
                                          sig=signal.SIGINT)
    assert code == 130, screen
    last = screen.rstrip("\r\n").rsplit("\r\n", 1)[-1]
    m = KEPT.fullmatch(last.split(" (only what", 1)[0])
    assert m, repr(screen[-400:])
    files, sections, vectors = map(int, m.groups())
    assert 0 < vectors < SECTIONS and vectors <= sections
    st = json.loads(run_folio("status", "--json", cwd=root, env={"FOLIO_ENDPOINT": srv.url}).stdout)
    assert (st["files"], st["sections"], st["embedded"]) == (files, sections, vectors), st
    again = run_folio("index", "--json", cwd=root, env={"FOLIO_ENDPOINT": srv.url}, timeout=300)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["embedded"] == SECTIONS - vectors  # the rest only


def test_a_lexical_only_run_on_a_terminal_counts_files_not_sections(tmp_path):
    root = many_files(tmp_path / "c", 60, 3)
    code, out, screen = run_on_a_terminal(root, f"http://127.0.0.1:{free_port()}/v1/embeddings")
    assert code == 0, screen
    assert "sections embedded" not in screen and "embedding sections" not in screen
    assert "lexical plane only" in screen and "/60" in screen
    assert out.startswith("indexed 60 files")
    assert "\x1b[?25l" not in screen or screen.rfind("\x1b[?25h") > screen.rfind("\x1b[?25l")  # cursor back


def test_off_a_terminal_a_long_run_says_how_long_then_a_few_plain_lines(tmp_path, fake_server, run_folio):
    # 960 sections, 30 requests of 32 at 0.6 s each: about 20 s of embedding
    srv = fake_server(dim=32, delay_ms=600)
    root = many_files(tmp_path / "c")
    t0 = time.monotonic()
    r = run_folio("index", cwd=root, env={"FOLIO_ENDPOINT": srv.url}, timeout=300)
    took = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert "\r" not in r.stderr and "\x1b" not in r.stderr  # no bar, no control characters
    est = [ln for ln in lines if ln.startswith("indexing: about")]
    assert len(est) == 1 and "to embed the" in est[0] and "sections/s measured" in est[0], r.stderr
    plain = [ln for ln in lines if re.fullmatch(r"indexing: embedded [\d,]+ of [\d,]+ sections \(\d+/s.*\)", ln)]
    assert 1 <= len(plain) <= 1 + took // 30, r.stderr  # a few, not one per batch
    assert len(lines) == len(est) + len(plain), r.stderr


def test_a_short_run_off_a_terminal_prints_no_progress(tmp_path, fake_server, run_folio):
    srv = fake_server(dim=32)
    root = many_files(tmp_path / "c", 5, 3)
    r = run_folio("index", cwd=root, env={"FOLIO_ENDPOINT": srv.url})
    assert r.returncode == 0 and r.stderr == ""


def test_a_few_small_files_before_one_big_table_do_not_make_the_estimate(tmp_path, fake_server, run_folio):
    """Eight notes of a line each, then one big table: the notes' sections per byte, stretched over
    the table's bytes, said `about 65 minutes to embed the 11,654 sections left` for a run of about
    600 sections and three minutes. The estimate waits until what was read can stand for the rest
    (every file read here), and names the sections the run then embeds."""
    srv = fake_server(dim=32, delay_ms=400)
    root = tmp_path / "c"
    root.mkdir()
    for i in range(8):
        (root / f"a{i}.md").write_text(f"# Note {i}\n\nword{i}\n")
    rows = "".join(f"| {i} | item{i} | value {i * 7} and some words |\n" for i in range(12000))
    (root / "zz-table.md").write_text("# Big table\n\n| id | name | value |\n|---|---|---|\n" + rows)
    r = run_folio("index", "--json", "--max-chars", "300", cwd=root, env={"FOLIO_ENDPOINT": srv.url}, timeout=300)
    assert r.returncode == 0, r.stderr
    embedded = json.loads(r.stdout)["embedded"]
    est = [ln for ln in r.stderr.splitlines() if ln.startswith("indexing: about")]
    assert len(est) == 1, r.stderr  # the run is long enough to be told
    said = int(re.search(r"to embed the ([\d,]+) sections left", est[0]).group(1).replace(",", ""))
    assert said <= embedded, (est[0], embedded)


def test_index_run_from_a_subdirectory_names_the_corpus_it_indexes(tmp_path):
    """`folio index` typed in a subdirectory of a corpus indexes the whole corpus (it walks up to its
    `.folio/`): on a terminal it started reading and embedding a thousand files, not the few under
    the user's feet, without a word of which root. It names it first."""
    root = many_files(tmp_path / "c", 6, 2)
    (root / "sub").mkdir()
    (root / "sub" / "here.md").write_text("# Here\n\ntext\n")
    down = f"http://127.0.0.1:{free_port()}/v1/embeddings"
    code, out, _ = run_on_a_terminal(root, down)
    assert code == 0 and out.startswith("indexed 7 files"), out
    code, out, screen = run_on_a_terminal(root, down, cwd=root / "sub")
    assert code == 0 and out.startswith("indexed 7 files"), (out, screen)
    assert screen.startswith(f"indexing the corpus at {root.resolve()} (found above this directory)\r\n"), screen
    code, out, screen = run_on_a_terminal(root, down)  # at the root: nothing to name
    assert code == 0 and "found above this directory" not in screen, screen


def test_the_bar_drawn_again_below_the_estimate_keeps_an_eta_that_agrees_with_its_rate(tmp_path, fake_server):
    """The run's estimate is a line of its own, and the bar is drawn again below it at hundreds of
    sections: click timed its ETA from that redraw, took them for done in no time, and showed
    `00:01:54` beside `10 sections/s` with 3,000 sections left (and the line above said 6 minutes).
    The ETA counts from the first batch sent, as the rate does."""
    srv = fake_server(dim=32, delay_ms=800)
    root = many_files(tmp_path / "c")
    code, _out, screen = run_on_a_terminal(root, srv.url, timeout=300)
    assert code == 0, screen[-500:]
    est = screen.find("indexing: about")
    assert est > 0, screen[-500:]  # long enough to be told how long
    after = BAR.findall(screen[est:])
    assert after, screen[est:est + 500]
    done, total, _pct, eta, rate = after[0]
    h, m, s = map(int, eta.split(":"))
    by_rate = (int(total) - int(done)) / int(rate)
    assert h * 3600 + m * 60 + s >= by_rate / 2, (after[0], by_rate)
