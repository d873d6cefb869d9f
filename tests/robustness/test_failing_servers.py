"""Failing embeddings servers through the real CLI: every failure is one sentence (never a
traceback), no run waits without bound, the index from before the run keeps answering queries, and
the next run resumes. Faults come from the fake server's controls (tests/fakeserver.py), from
SIGKILL/SIGSTOP of its process, and from a port nobody listens on.

Not repeated here (tests/test_core_cli.py has them): the same-dimension model swap caught by the
fingerprint at index and query time, a 500 after N requests keeping committed batches, the
too-large-input bisection."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time

import pytest
from helpers import free_port

DOCS = {
    f"d{i:02}.md": f"# Document {i}\n\n"
    + "\n\n".join(f"## Part {j}\n\nnotes about topic{i} and subject{j} in plain words" for j in range(8))
    + "\n"
    for i in range(12)
}
SECTIONS = 12 * 9
QUERIES = ["notes about topic3 and subject5", "topic7 subject1"]


def backdate(root, seconds=10):
    past = time.time() - seconds
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".folio"]
        for f in files:
            os.utime(os.path.join(dirpath, f), (past, past))


def answers(run_folio, root, *extra) -> list:
    """What queries return now: (mode, [(path, start, end)]) per query, plus the notices."""
    out = []
    for q in QUERIES:
        r = run_folio("query", q, "--json", "-l", "3", *extra, cwd=root)
        assert r.returncode == 0, r.stderr
        assert "Traceback" not in r.stderr
        d = json.loads(r.stdout)
        out.append((d["mode"], [(h["path"], h["start"], h["end"]) for h in d["results"]]))
    return out


def status(run_folio, root) -> dict:
    r = run_folio("status", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def one_sentence(r) -> str:
    """The run failed with exactly one `folio: ...` line and nothing that looks like a crash."""
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and "Error:" not in r.stderr.replace("folio:", "")
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("folio: ")]
    assert len(errors) == 1, r.stderr
    return errors[0]


@pytest.fixture
def built(tmp_path, write_tree, fake_server, run_folio):
    """An indexed corpus, its server, and what its queries answer while all is well."""
    srv = fake_server(dim=96)
    root = write_tree(tmp_path / "c", DOCS)
    backdate(root)
    r = run_folio("index", "--endpoint", srv.url, cwd=root)
    assert r.returncode == 0, r.stderr
    before = answers(run_folio, root)
    assert all(mode == "hybrid" for mode, _ in before)  # the server answered (the default mode)
    return root, srv, before


def edit(root, name="d03.md", extra="\n## Added\n\nfresh words about a lighthouse keeper\n"):
    p = root / name
    p.write_text(p.read_text() + extra)
    past = time.time() - 5  # out of the racy window, so a no-op run really reads nothing
    os.utime(p, (past, past))


# ------------------------------------------------------------------ unreachable at start


def test_unreachable_at_start_builds_lexical_for_an_index_that_never_held_vectors(tmp_path, write_tree,
                                                                                  run_folio):
    root = write_tree(tmp_path / "c", DOCS)
    nobody = f"http://127.0.0.1:{free_port()}/v1/embeddings"
    r = run_folio("index", "--endpoint", nobody, "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    assert f"no embeddings server answers at {nobody}: built the lexical plane only" in r.stderr
    assert "folio config set endpoint URL" in r.stderr
    # the endpoint came from a flag, which an index without vectors does not record: the way back names it
    port = nobody.split(":")[2].split("/")[0]
    assert f"`llama-server -m MODEL.gguf --embeddings --port {port}`" in r.stderr, r.stderr
    assert (f"run `folio index --endpoint {nobody}` again (a flag is not remembered: `folio config set endpoint "
            f"{nobody}` keeps it)") in r.stderr, r.stderr
    s = status(run_folio, root)
    assert s["sections"] == SECTIONS and s["embedded"] == 0 and s["model"] is None
    r = run_folio("query", "topic3 subject5", "--json", "-l", "1", cwd=root)
    d = json.loads(r.stdout)
    assert d["mode"] == "lexical" and (d["results"][0]["path"], d["results"][0]["start"]) == ("d03.md", 3 + 4 * 5)
    assert any("holds no vectors" in n for n in d["notices"])


def test_unreachable_at_start_indexes_lexically_in_an_index_with_vectors(built, run_folio):
    root, srv, before = built
    edit(root)
    srv.stop()
    r = run_folio("index", cwd=root)
    line = one_sentence(r)
    assert "no embeddings server answers at" in line and "1 section in 1 file waits for vectors" in line
    s = status(run_folio, root)
    assert (s["changed"], s["waiting"], s["embedded"]) == (0, 1, SECTIONS)  # the edit is in, lexically
    # Queries still answer: lexically, saying why, and without trying to refresh through a dead server.
    r = run_folio("query", "topic3 subject5", "--json", cwd=root)
    d = json.loads(r.stdout)
    assert r.returncode == 0 and d["mode"] == "lexical"
    assert any("does not answer: ranking lexically" in n for n in d["notices"])
    srv.restart()
    r = run_folio("index", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["embedded"] == 1
    assert answers(run_folio, root) == before
    assert status(run_folio, root)["embedded"] == SECTIONS + 1


def test_a_server_gone_is_told_to_start_on_the_endpoints_own_port(built, run_folio):
    # "start one (e.g. `llama-server ... --port 8080`)" for an endpoint on another port started a
    # server where folio would never look: the example names the port of the endpoint in force
    root, srv, _ = built
    port = srv.url.split(":")[2].split("/")[0]
    assert port != "8080"
    edit(root)
    srv.stop()
    for r in (run_folio("index", cwd=root), run_folio("similar", "-", cwd=root, input="# Draft\n\nlighthouse\n")):
        line = one_sentence(r)
        assert "no embeddings server answers at" in line, line
        assert f"`llama-server -m MODEL.gguf --embeddings --port {port}`" in line, line


# ------------------------------------------------------------------ dies, hangs, crawls


def _when(srv, requests: int, action) -> threading.Thread:
    """Run action() once the server has seen `requests` embedding requests."""
    def watch():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if srv.stats()["requests"] >= requests:
                    break
            except OSError:
                return
            time.sleep(0.02)
        action()
    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


def many_docs(n=40, parts=12):
    return {f"m{i:03}.md": f"# Doc {i}\n\n" + "\n\n".join(f"## P{j}\n\nwords {i} {j} of text" for j in range(parts))
            for i in range(n)}


def test_server_killed_mid_run_keeps_what_was_committed_and_the_next_run_finishes(
        tmp_path, write_tree, fake_server, run_folio):
    srv = fake_server(dim=48, delay_ms=40)
    root = write_tree(tmp_path / "c", many_docs())
    total = 40 * 13
    watcher = _when(srv, 14, srv.kill)  # probe, calibration, then a few committed batches
    r = run_folio("index", "--endpoint", srv.url, cwd=root)
    watcher.join()
    line = one_sentence(r)
    assert "failed mid-run" in line and ("connection refused" in line or "closed the connection" in line)
    assert "embedded before that are kept" in line and "run `folio index` again" in line
    s = status(run_folio, root)
    assert 0 < s["embedded"] < total
    r = run_folio("query", "words 3 4 of text", "--json", cwd=root)
    assert r.returncode == 0 and json.loads(r.stdout)["mode"] == "lexical"
    srv.restart(delay_ms=0)
    r = run_folio("index", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    s = status(run_folio, root)
    assert s["embedded"] == s["sections"] == total


def test_a_hung_server_is_given_up_and_named_not_waited_for(built, run_folio):
    root, srv, before = built
    edit(root)
    os.kill(srv.proc.pid, signal.SIGSTOP)  # takes connections, answers nothing
    try:
        r = run_folio("index", cwd=root, env={"FOLIO_TIMEOUT": "1"}, timeout=60)
        line = one_sentence(r)
        assert "sent nothing back in 1 s" in line and "/health does not answer either: it looks hung" in line
        assert "restart it" in line
        r = run_folio("query", "topic3 subject5", "--json", cwd=root, env={"FOLIO_TIMEOUT": "1"}, timeout=60)
        assert r.returncode == 0 and json.loads(r.stdout)["mode"] == "lexical"
    finally:
        os.kill(srv.proc.pid, signal.SIGCONT)
    r = run_folio("index", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["embedded"] == 1
    assert answers(run_folio, root) == before


def test_a_slow_but_alive_server_is_waited_for_and_said_to_be_slow(built, run_folio):
    root, srv, before = built
    edit(root)
    srv.control(delay_ms=1500)  # slower than the 1 s timeout, and /health still answers
    r = run_folio("index", "--json", cwd=root, env={"FOLIO_TIMEOUT": "1"}, timeout=120)
    assert r.returncode == 0, r.stderr
    assert re.search(r"is slow: a request of \d+ inputs took more than 1 s", r.stderr)
    assert json.loads(r.stdout)["embedded"] == 1
    srv.control(delay_ms=0)
    assert answers(run_folio, root) == before


def test_a_request_that_hangs_once_is_retried(built, run_folio):
    root, srv, before = built
    edit(root)
    srv.control(fail="timeout", times=1, hang_s=3)  # the first request hangs, then the server drops it
    r = run_folio("index", "--json", cwd=root, env={"FOLIO_TIMEOUT": "1"}, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["embedded"] == 1
    assert srv.stats()["faults"] == 1
    assert answers(run_folio, root) == before


def test_a_server_too_slow_for_ever_stops_with_the_fix(built, run_folio):
    root, srv, before = built
    edit(root)
    srv.control(delay_ms=9000)  # 1 + 2 + 4 s of waiting is not enough
    r = run_folio("index", cwd=root, env={"FOLIO_TIMEOUT": "1"}, timeout=120)
    line = one_sentence(r)
    assert re.search(r"is up \(it answers /health\) but did not answer a request of \d+ inputs in 7 s", line)
    assert "batch_size" in line and "folio config set timeout" in line
    srv.control(delay_ms=0)
    assert answers(run_folio, root) == before
    assert run_folio("index", cwd=root).returncode == 0


# ------------------------------------------------------------------ one bad input in a batch


@pytest.mark.parametrize("fault", ["500", "nan", "zero", "not_json", "wrong_count", "wrong_dim"])
def test_one_poisoned_input_is_bisected_named_and_skipped(built, run_folio, fault):
    root, srv, before = built
    edit(root, "d05.md", "\n## Poisoned\n\nthis part holds the POISON pill\n\n## Healthy\n\nlighthouse keeper\n")
    start = (root / "d05.md").read_text().split("\n").index("## Poisoned") + 1
    srv.control(fail_input_containing="POISON", fail_input_fault=fault, reset_stats=True)
    r = run_folio("index", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    warnings = [ln for ln in r.stderr.splitlines() if ln.startswith("warning: ")]
    assert len(warnings) == 1, r.stderr
    assert warnings[0].startswith(f"warning: d05.md:{start}-{start + 2}: not embedded, ")
    assert warnings[0].endswith("the next `folio index` tries it again")
    assert json.loads(r.stdout)["embedded"] == 1  # the healthy new section
    # probe, calibration, the batch, the probe check, the halves; a 500 may be transient, so the whole
    # batch is tried twice more before it is bisected (the halves are not retried)
    assert srv.stats()["requests"] <= (10 if fault == "500" else 8)
    s = status(run_folio, root)
    assert s["sections"] == SECTIONS + 2 and s["embedded"] == SECTIONS + 1
    # The skipped section stays findable by its words; everything else ranks semantically as before.
    r = run_folio("query", "POISON pill", "--lexical", "--json", "-l", "1", cwd=root)
    assert json.loads(r.stdout)["results"][0]["start"] == start
    assert answers(run_folio, root) == before
    srv.control(fail_input_containing=None)
    r = run_folio("index", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["embedded"] == 1
    assert status(run_folio, root)["embedded"] == SECTIONS + 2


def test_huge_finite_components_are_a_vector_like_any_other(built, run_folio):
    """A server answering with components near 1e20 (finite, but their squares overflow float32): the
    vector is normalised all the same, at both ends, with no numpy warning and no silent zero row."""
    root, srv, before = built
    edit(root, "d05.md", "\n## Poisoned\n\nthis part holds the POISON pill\n")
    start = (root / "d05.md").read_text().split("\n").index("## Poisoned") + 1
    srv.control(fail_input_containing="POISON", fail_input_fault="huge")
    r = run_folio("index", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip() == "", r.stderr  # no overflow warning, nothing skipped
    assert json.loads(r.stdout)["embedded"] == 1
    srv.control(fail_input_containing=None)
    r = run_folio("query", "POISON pill", "--mode", "semantic", "--json", "-l", "1", cwd=root)
    [hit] = json.loads(r.stdout)["results"]
    assert (hit["path"], hit["start"]) == ("d05.md", start) and hit["score"] > 0.5  # its own words' vector
    # The question's vector too: the same ranking and scores as from a well-behaved answer.
    plain = json.loads(run_folio("query", "topic3 subject5", "--mode", "semantic", "--json", cwd=root).stdout)
    srv.control(fail="huge")
    r = run_folio("query", "topic3 subject5", "--mode", "semantic", "--json", cwd=root)
    assert r.returncode == 0 and r.stderr.strip() == "", r.stderr
    huge = json.loads(r.stdout)
    assert huge["mode"] == "semantic" and not huge["notices"]
    assert [(h["path"], h["start"]) for h in huge["results"]] == [(h["path"], h["start"]) for h in plain["results"]]
    assert [h["score"] for h in huge["results"]] == pytest.approx([h["score"] for h in plain["results"]], abs=1e-3)
    assert huge["results"][0]["score"] > 0.3
    srv.control(fail=None)
    assert answers(run_folio, root) == before


# ------------------------------------------------------------------ storms and unusable answers


@pytest.mark.parametrize(("code", "fault", "why"), [
    (429, "429", "rate-limiting folio"),
    (503, "503", "still loading its model"),
])
def test_a_storm_of_busy_answers_is_retried_a_bounded_number_of_times(built, run_folio, code, fault, why):
    root, srv, before = built
    edit(root)
    srv.control(fail=fault, retry_after="0", reset_stats=True)
    r = run_folio("index", cwd=root)
    line = one_sentence(r)
    assert f"answered HTTP {code}" in line and "to 9 tries" in line and why in line
    assert srv.stats()["requests"] == 9  # one request, eight retries, then a stop
    r = run_folio("query", "topic3 subject5", "--json", cwd=root)
    d = json.loads(r.stdout)
    assert r.returncode == 0 and d["mode"] == "lexical"
    assert any(f"answered HTTP {code}" in n for n in d["notices"])
    srv.control(fail=None)
    r = run_folio("index", "--json", cwd=root)
    assert r.returncode == 0 and json.loads(r.stdout)["embedded"] == 1
    assert answers(run_folio, root) == before


@pytest.mark.parametrize(("fault", "says"), [
    ("500", 'HTTP 500: "injected failure"'),
    ("nan", "a vector with NaN or infinite values"),
    ("zero", "returned a zero vector"),
    ("wrong_count", "0 vectors for 1 inputs"),
    ("not_json", "with an HTML page: it is not an OpenAI-compatible embeddings endpoint"),
    ("disconnect", "closed the connection without answering"),
])
def test_a_server_answering_garbage_stops_the_run_with_one_sentence(built, run_folio, fault, says):
    root, srv, before = built
    edit(root)
    srv.control(fail=fault)
    r = run_folio("index", cwd=root)
    line = one_sentence(r)
    assert says in line and "1 section in 1 file waits for vectors" in line
    assert status(run_folio, root)["waiting"] == 1
    # The query falls back to the lexical plane and says why.
    r = run_folio("query", "topic3 subject5", "--json", cwd=root)
    d = json.loads(r.stdout)
    assert r.returncode == 0, r.stderr
    assert d["mode"] == "lexical" and d["results"]
    srv.control(fail=None)
    r = run_folio("index", "--json", cwd=root)
    assert r.returncode == 0 and json.loads(r.stdout)["embedded"] == 1
    assert answers(run_folio, root) == before


def test_a_server_restarted_on_a_model_of_another_dimension(built, run_folio):
    # tests/test_core_cli.py covers another model of the same dimension; a different dimension
    # used to fail the probe itself ("run --rebuild") instead of reaching the fingerprint.
    root, srv, _before = built
    srv.restart(dim=80, space="other")
    r = run_folio("query", "topic3 subject5", "--json", cwd=root)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr  # lexically, with the fix
    [notice] = [n for n in json.loads(r.stdout)["notices"] if "ranking lexically" in n]
    assert "80-dimensional vectors" in notice and "96-dimensional" in notice and "another model" in notice
    assert "run `folio index` to re-embed" in notice and "--rebuild" not in notice  # the command that is needed
    edit(root)
    r = run_folio("index", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    assert "another vector space" in r.stderr
    assert json.loads(r.stdout)["embedded"] == SECTIONS + 1
    s = status(run_folio, root)
    assert s["dim"] == 80 and s["embedded"] == s["sections"]
    assert answers(run_folio, root)[0][0] == "hybrid"


def test_a_server_switching_dimension_mid_run_stops_it_and_the_old_index_answers(built, run_folio):
    root, srv, before = built
    edit(root, "d04.md", "\n## Long healthy part\n\n" + "plain healthy words " * 40 + "\n\n## Odd\n\nPOISON here\n")
    srv.control(fail_input_containing="POISON", fail_input_fault="switch_dim")  # the probe is answered in 95 too
    r = run_folio("index", cwd=root)
    line = one_sentence(r)
    assert "95-dimensional vectors" in line and "96-dimensional" in line
    assert "run `folio index` again" in line
    srv.control(fail_input_containing=None, fail=None)
    assert answers(run_folio, root) == before
    r = run_folio("index", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    s = status(run_folio, root)
    assert s["embedded"] == s["sections"] == SECTIONS + 2 and s["dim"] == 96
