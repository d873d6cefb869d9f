"""What `folio index`'s progress says is true: the sections it counts as embedded are committed
(a server that dies mid-run leaves them in the index, and the next run embeds only the rest), its
total counts what the run's summary counts, and the total moves only by what the files read tell."""

from __future__ import annotations

import json
import re
from pathlib import Path

from test_progress import many_files, run_on_a_terminal

BAR_COUNTS = re.compile(r"embedding sections\s+\[[#-]+\]\s+(\d+)/(\d+)")
SUMMARY_EMBEDDED = re.compile(r"sections: ([\d,]+) embedded")


def test_what_progress_counts_as_embedded_is_kept_when_the_server_fails(tmp_path, fake_server, run_folio):
    """A server that fails 14 answers in, during a --jobs 2 run: every section the progress line
    counted as embedded is in the index afterwards, and the next run sends only the rest."""
    srv = fake_server(dim=32, delay_ms=150, fail_after=14)
    root = many_files(tmp_path / "c")
    (root / "folio.yaml").write_text("jobs: 2\n")
    code, _out, screen = run_on_a_terminal(root, srv.url)
    assert code == 1, screen  # the server failed mid-run: exit 1 with the sentence
    shown = [int(done) for done, _total in BAR_COUNTS.findall(screen)]
    assert shown and max(shown) > 0, screen
    held = json.loads(run_folio("status", "--json", cwd=root).stdout)["embedded"]
    sections = json.loads(run_folio("status", "--json", cwd=root).stdout)["sections"]
    assert 0 < held < sections
    assert max(shown) <= held, (shown, held)
    # the answers that came before the failure were committed too, not only whole batches
    assert held >= (14 - 2) * 32 - 32, held  # 14 answers less the probes, less at most one request in flight

    srv.control(fail_after=None, reset_stats=True, record=True)
    r = run_folio("index", "--json", cwd=root, env={"FOLIO_ENDPOINT": srv.url})
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["embedded"] == sections - held
    sent = [t for t in srv.inputs() if "Topic" in t or re.fullmatch(r"File \d+", t)]
    assert len(sent) == sections - held, (len(sent), sections, held)


def dense_then_sparse(root: Path) -> Path:
    """80 files of 20 short sections, then (in path order) 80 files of 2 long ones; one section is
    the same in every file (embedded once a batch, counted once per file, as the summary counts)."""
    shared = "\n## Shared\n\nThe same paragraph in every file of this corpus.\n"
    for f in range(80):
        body = "".join(f"\n## Dense {f}-{s}\n\nShort note {f} {s}.\n" for s in range(20))
        (root / f"a{f:03d}.md").parent.mkdir(parents=True, exist_ok=True)
        (root / f"a{f:03d}.md").write_text(f"# Dense {f}\n{body}{shared}")
    for f in range(80):
        body = "".join(f"\n## Sparse {f}-{s}\n\n" + f"Long paragraph {f} {s} about harbours. " * 30 + "\n"
                       for s in range(2))
        (root / f"b{f:03d}.md").write_text(f"# Sparse {f}\n{body}{shared}")
    return root


def test_the_total_counts_what_the_summary_counts_and_moves_only_by_the_files_read(tmp_path, fake_server):
    """Read in path order, the dense files alone would extrapolate to ~4x the sections to embed: the
    total a bar shows stays within 1.5x of the final count throughout, and ends equal to the summary's
    (the shared section embedded once a batch counts once per file, as the summary counts it)."""
    srv = fake_server(dim=32, delay_ms=100)
    root = dense_then_sparse(tmp_path / "c")
    code, out, screen = run_on_a_terminal(root, srv.url)
    assert code == 0, screen
    embedded = int(SUMMARY_EMBEDDED.search(out).group(1).replace(",", ""))
    assert 80 * 21 + 80 * 3 < embedded <= 80 * 22 + 80 * 4  # the shared section is copied once committed
    bars = [(int(d), int(t)) for d, t in BAR_COUNTS.findall(screen)]
    assert len(bars) >= 3, screen
    # a spread of the files is read first and its sections per byte stand for the rest: each file read
    # then moves the total by its own difference from that estimate (here up to ~+40% while the dense
    # files are read, back as the sparse ones are), never by a new guess for every file left
    assert all(embedded / 1.5 <= total <= embedded * 1.5 for _done, total in bars), (bars, embedded)
    assert bars[-1] == (embedded, embedded), (bars[-1], embedded)  # the last bar says what the summary says
