"""Records are divided by the server's token counts, record by record (issue 15.5).

The character budget (`--max-chars`) is the user's ceiling and never moves. folio learns how many
tokens the server takes in one input (llama-server: /v1/models gives the model's context, /tokenize
counts, and a probe that long is taken whole or refused naming the physical batch), and divides only
the records over it, by the server's own counts. So one dense file never changes another file's
records, and the same text under the same settings and server gives the same records whatever the
index went through before.
"""

from __future__ import annotations

import json

import pytest
from fakeserver import count_tokens
from helpers_index import assert_same_index, read_index

from folio.reader import reader_text


def prose(i: int, paragraphs: int = 8) -> str:
    """A section of plain English: ~4 characters a token on the fake server, ~4 on a real one."""
    para = " ".join(f"Sentence {j} of part {i} says the ledger keeps every entry it was given." for j in range(6))
    return f"# Part {i}\n\n" + "\n\n".join(f"{para} ({k})" for k in range(paragraphs)) + "\n"


# 3 bytes a character: ~0.75 tokens a character where prose has ~0.25. Longer in characters than any
# prose section, so a budget calibrated on the longest record would be set by this file.
DENSE = "# Dense\n\n" + "\n".join("漢字仮名交じり文" * 8 for _ in range(60)) + "\n"
NORMAL = {f"docs/part{i}.md": prose(i) for i in range(4)} | {"docs/short.md": "# Short\n\nA short note.\n"}

# One paragraph on one line (a Markdown source that does not wrap its prose): ~160 tokens on the
# fake server, past a 64-token physical batch, and not divisible at a line end.
ONE_LINE = ("# Notes\n\n## Wide\n\n" + " ".join(f"Clause {i} of the unwrapped paragraph names the harbour "
                                                "pilot on duty." for i in range(10)) + "\n\n## Short\n\nA short one.\n")


def index(run_folio, root, url, *args):
    r = run_folio("index", "--endpoint", url, "--json", *args, cwd=root, timeout=600)  # llama on a busy machine
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout), r.stderr


def records_of(root, skip=("dense.md",)) -> set:
    """(path, start, end, text_hash) of every record with a vector, files in `skip` left out."""
    st = read_index(root)
    assert all(vec for _slot, vec in st.records.values())
    return {(k[0], k[1], k[2], k[5]) for k in st.records if k[0] not in skip}


def test_one_dense_file_does_not_change_other_files_records(tmp_path, write_tree, fake_server, run_folio):
    srv = fake_server(dim=32, max_tokens=300)
    plain = write_tree(tmp_path / "plain", NORMAL)
    dense = write_tree(tmp_path / "dense", NORMAL | {"dense.md": DENSE})
    rep_plain, _ = index(run_folio, plain, srv.url)
    rep_dense, err = index(run_folio, dense, srv.url)
    assert records_of(dense) == records_of(plain)
    assert rep_dense["budget"] == rep_plain["budget"] == 8000 and rep_dense["tokens"] == rep_plain["tokens"] == 300
    assert "refused" not in err
    # the dense file alone is divided finer, every record within the server's 300 tokens
    st = read_index(dense)
    lines = DENSE.split("\n")
    pieces = [k for k in st.records if k[0] == "dense.md"]
    assert len(pieces) >= 6
    for _path, start, end, *_ in pieces:
        assert count_tokens(reader_text("\n".join(lines[start - 1:end]))) <= 300


def test_the_same_text_gives_the_same_records_whatever_the_history(tmp_path, write_tree, fake_server, run_folio):
    srv = fake_server(dim=32, max_tokens=300)
    root = write_tree(tmp_path / "c", NORMAL)
    index(run_folio, root, srv.url)
    # a dense file arrives and a file changes in the same run; then both are undone
    write_tree(root, {"dense.md": DENSE, "docs/part1.md": prose(1) + "\nOne more paragraph, added.\n"})
    index(run_folio, root, srv.url)
    (root / "dense.md").unlink()
    write_tree(root, {"docs/part1.md": prose(1)})
    index(run_folio, root, srv.url)
    clean = write_tree(tmp_path / "clean", NORMAL)
    index(run_folio, clean, srv.url)
    assert_same_index(root, clean, queries=("ledger entry", "part 1"))


def test_a_fresh_build_leaves_no_dead_rows(tmp_path, write_tree, fake_server, run_folio):
    srv = fake_server(dim=32, max_tokens=300)
    root = write_tree(tmp_path / "c", NORMAL | {"dense.md": DENSE})
    rep, _ = index(run_folio, root, srv.url)
    assert rep["dead_rows"] == 0 and rep["compacted"] == 0  # none made, none to reclaim
    s = json.loads(run_folio("status", "--json", cwd=root).stdout)
    assert s["dead_rows"] == 0 and s["embedded"] == s["sections"]
    assert srv.stats()["status"].get("500") == 1  # only the limit probe was refused: no record ever was


def test_a_server_restarted_with_a_smaller_batch_divides_every_file_again(tmp_path, write_tree, fake_server,
                                                                          run_folio):
    srv = fake_server(dim=32, max_tokens=512)
    root = write_tree(tmp_path / "c", NORMAL)
    index(run_folio, root, srv.url)
    srv.control(max_tokens=200)
    edited = NORMAL | {"docs/part0.md": prose(0) + "\nA paragraph added.\n"}
    write_tree(root, edited)  # a run that embeds asks the server again
    rep, err = index(run_folio, root, srv.url)
    assert "the server now takes 200 tokens an input" in err and rep["tokens"] == 200
    clean = write_tree(tmp_path / "clean", edited)
    index(run_folio, clean, srv.url)
    assert_same_index(root, clean, queries=("ledger entry",))
    # and the run after divides and embeds nothing again (it may re-hash files written within the racy
    # 2 s of their stamp, as git does, which a fast machine makes likely here)
    after, err = index(run_folio, root, srv.url)
    assert (after["embedded"], after["changed"]) == (0, 0) and "now takes" not in err


@pytest.mark.llama
def test_real_llama_server_divides_by_its_own_counts(tmp_path, corpus, write_tree, llama_server, run_folio):
    # llama-server with a 128-token physical batch: a hex file (dense for a WordPiece tokenizer)
    # does not change how rust-book's files are divided, and no record is ever refused.
    import httpx

    srv = llama_server(["-ub", "128", "-b", "128"])
    book = corpus("rust-book")
    files = {p.relative_to(book).as_posix(): p.read_bytes() for p in sorted(book.rglob("ch04*.md"))}
    plain = write_tree(tmp_path / "plain", files)
    hexed = write_tree(tmp_path / "hex", files | {"hex.md": "# Dump\n\n" + "\n".join(
        " ".join(f"{(i * 31 + j) % 256:02x}" for j in range(16)) for i in range(200)) + "\n"})
    rep, err = index(run_folio, plain, srv.url)
    assert rep["tokens"] == 128 and "refused" not in err
    rep, err = index(run_folio, hexed, srv.url)
    assert rep["tokens"] == 128 and "refused" not in err
    assert records_of(hexed, skip=("hex.md",)) == records_of(plain)
    st = read_index(hexed)
    text = {p: (hexed / p).read_text(encoding="utf-8").split("\n") for p in {k[0] for k in st.records}}
    for path, start, end, *_ in st.records:
        sent = reader_text("\n".join(text[path][start - 1:end]))
        n = len(httpx.post(srv.base + "/tokenize", json={"content": sent, "add_special": True}).json()["tokens"])
        assert n <= 128, f"{path}:{start}-{end} holds {n} tokens"



@pytest.mark.llama
def test_real_llama_server_with_a_small_batch_cut_lines_are_said_and_doctor_names_the_flags(
        tmp_path, write_tree, llama_server, run_folio):
    # llama-server -b 64 -ub 64 (sections and lines longer than the batch): the records over it are
    # divided, the one line over it is cut, and both the run and doctor say so, doctor with the flags.
    srv = llama_server(["-ub", "64", "-b", "64"])
    wrapped = "# Wrapped\n\n" + "\n".join(f"Sentence {j} of the wrapped part says the ledger keeps it." for j in range(40))
    root = write_tree(tmp_path / "c", {"notes.md": ONE_LINE, "wrapped.md": wrapped + "\n"})
    rep, err = index(run_folio, root, srv.url)
    assert rep["tokens"] == 64 and rep["truncated"] == 1 and rep["embedded"] > 4, rep
    said = [n for n in rep["notices"] if "`folio status --truncated` lists them" in n]
    assert len(said) == 1 and "(64 tokens)" in said[0] and "folio doctor" in said[0] and said[0] in err, err
    assert "notes.md:5-5" in run_folio("status", "--truncated", cwd=root).stdout
    doc = run_folio("doctor", "--endpoint", srv.url, cwd=root, timeout=300)
    assert doc.returncode == 1 and "restart llama-server with -b 512 -ub 512" in doc.stdout, doc.stdout


@pytest.mark.llama
def test_real_llama_server_whose_slots_share_a_short_context_is_not_said_to_be_the_models(
        tmp_path, write_tree, llama_server, run_folio):
    # llama-server -np 4 -c 512: each slot reads 256 tokens, the model 512. Records are divided at
    # 256, and status, config and the run's report call that the server's context, never the model's
    # (which no flag would change), and doctor names the flags that give the model's back.
    srv = llama_server(["-np", "4", "-c", "512"])
    root = write_tree(tmp_path / "c", NORMAL)
    rep, _err = index(run_folio, root, srv.url)
    assert rep["tokens"] == 256, rep
    s = json.loads(run_folio("status", "--json", cwd=root).stdout)
    assert s["tokens_from"] == "server_context", s
    for text in (run_folio("status", cwd=root).stdout, run_folio("config", cwd=root).stdout):
        line = next(ln for ln in text.splitlines() if "tokens an input" in ln)
        assert "256 tokens an input (the server's context, shorter than the model's" in line, line
        assert "the model's context)" not in line, line
    doc = run_folio("doctor", cwd=root, timeout=300)
    assert "restart llama-server with -c 2048 -b 512 -ub 512" in doc.stdout, doc.stdout

def test_config_status_and_doctor_name_the_same_budget_and_say_why(tmp_path, write_tree, fake_server, run_folio):
    """One number for one thing: the budget a run divides by is shown with where it comes from in
    `folio config`, `folio status` and `folio doctor`, and the server's token limit beside it."""
    srv = fake_server(dim=32, max_tokens=300, n_ctx=300)  # a model whose context is 300 tokens
    root = write_tree(tmp_path / "c", NORMAL | {"dense.md": DENSE})
    index(run_folio, root, srv.url)
    in_force = "8000 characters a record at most (max_chars, default)"
    cfg = run_folio("config", cwd=root)
    assert f"in force: {in_force}" in cfg.stdout and "300 tokens an input" in cfg.stdout
    st = run_folio("status", "--json", cwd=root)
    s = json.loads(st.stdout)
    assert (s["budget"], s["budget_from"], s["tokens"]) == (8000, "setting", 300)
    assert in_force in run_folio("status", cwd=root).stdout
    doc = run_folio("doctor", "--endpoint", srv.url, cwd=root)
    assert "max_chars, 8000, stays the ceiling" in doc.stdout, doc.stdout
    # max_chars changed in folio.yaml: config gives the new number in force; status the index's own
    # and says the next run divides again
    write_tree(root, {"folio.yaml": "max_chars: 3000\n"})
    assert "in force: 3000 characters a record at most (max_chars, folio.yaml)" in run_folio("config", cwd=root).stdout
    text = run_folio("status", cwd=root).stdout
    assert "8000 characters a record at most (as indexed; max_chars, folio.yaml, now gives 3000" in text
    rep, _ = index(run_folio, root, srv.url)
    assert rep["budget"] == 3000
    assert json.loads(run_folio("status", "--json", cwd=root).stdout)["budget"] == 3000


OPS = {"ops.md": "# Ops\n\n## Replication\n\nReplication lag grows when the replica falls behind the primary.\n\n"
                 "## Backups\n\nNightly backups go to cold storage.\n"}


def ask_long(run_folio, root, *args) -> dict:
    r = run_folio("query", *args, "-l", "2", "--json", cwd=root)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def cut_notice(answer: dict) -> str:
    said = [n for n in answer["notices"] if "ran past the" in n]
    assert len(said) == 1, answer["notices"]
    return said[0]


def test_a_question_or_passage_past_the_models_tokens_ranks_by_meaning_cut_not_lexically(
        tmp_path, write_tree, fake_server, run_folio):
    """An agent's long question or passage (a pasted log, a page-long hypothetical answer) used to
    drop the whole query to the lexical plane with the server's own advice ("increase the physical
    batch size"), which a 512-token model cannot take. It is cut to what the server takes."""
    srv = fake_server(max_tokens=300)
    root = write_tree(tmp_path / "c", OPS | {"folio.yaml": f"endpoint: {srv.url}\nmodel: fake\n"})
    index(run_folio, root, srv.url)
    long_q = "why does replication lag grow " * 200  # ~1,200 tokens on the fake server
    got = ask_long(run_folio, root, long_q)
    assert got["mode"] == "hybrid" and got["results"][0]["trail"][-1] == "Replication"
    said = cut_notice(got)
    assert said.startswith("(the question ran past the 300 tokens") and "by words whole" in said
    got = ask_long(run_folio, root, "backups", "--passage", "Nightly backups go to cold storage. " * 150)
    assert got["mode"] == "hybrid" and got["facets"] == ["passage"]
    said = cut_notice(got)
    assert said.startswith("(a passage ran past") and "by words" not in said
    short = ask_long(run_folio, root, "why does replication lag grow")
    assert not [n for n in short["notices"] if "ran past" in n]


@pytest.mark.llama
def test_real_llama_server_ranks_a_question_past_its_context_by_meaning(tmp_path, write_tree, llama, run_folio):
    root = write_tree(tmp_path / "c", OPS)
    index(run_folio, root, llama.url)
    got = ask_long(run_folio, root, "replication lag " * 3000)
    assert got["mode"] == "hybrid" and got["results"][0]["trail"][-1] == "Replication"
    assert "ran past the 512 tokens" in cut_notice(got)
    assert not any("physical batch" in n for n in got["notices"])


OLDER = "an older folio lowered the budget"


def test_the_older_folio_notice_only_for_an_index_an_older_folio_built(tmp_path, write_tree, fake_server, run_folio):
    # A new vector space records no token limit until the run learns it, as an older folio's index
    # did not: every endpoint change, a server restarted on another model and a first server after a
    # lexical-only build said an older folio had lowered the budget.
    import sqlite3

    a, other = fake_server(dim=32, max_tokens=300), fake_server(dim=32, max_tokens=300, space="b")
    root = write_tree(tmp_path / "c", NORMAL)
    index(run_folio, root, a.url)
    _, err = index(run_folio, root, other.url)  # another endpoint, another space
    assert "re-embedding every section" in err and OLDER not in err, err
    other.control(space="c")  # the same endpoint, restarted on another model; a file changes
    write_tree(root, {"docs/part0.md": prose(0) + "\nA paragraph added.\n"})
    _, err = index(run_folio, root, other.url)
    assert "re-embedding every section" in err and OLDER not in err, err
    lexical = write_tree(tmp_path / "lexical", NORMAL)
    run_folio("index", "--endpoint", "http://127.0.0.1:9/v1/embeddings", cwd=lexical)
    rep, err = index(run_folio, lexical, a.url)
    assert rep["embedded"] > 0 and OLDER not in err, err
    # an index with vectors and no token limit is what an older folio left: then it is true
    with sqlite3.connect(lexical / ".folio" / "index.db") as db:
        db.execute("DELETE FROM meta WHERE key IN ('tokens', 'tokens_from')")
    db.close()
    write_tree(lexical, {"docs/part1.md": prose(1) + "\nA paragraph added.\n"})
    rep, err = index(run_folio, lexical, a.url)
    assert "the server takes 300 tokens an input (its physical batch): every file is divided again" in err, err
    assert OLDER in err and rep["tokens"] == 300



def test_a_run_that_cuts_a_line_says_so_and_names_the_list(tmp_path, write_tree, fake_server, run_folio):
    """A single line longer than the server takes is cut for embedding (its end is searched by its
    words only): the run that embeds it says how many it cut and where they are listed, once; the
    next run, which embeds nothing, says nothing."""
    srv = fake_server(dim=32, max_tokens=64)
    root = write_tree(tmp_path / "c", {"notes.md": ONE_LINE})
    rep, err = index(run_folio, root, srv.url)
    assert rep["truncated"] == 1, rep
    said = [n for n in rep["notices"] if "cut" in n]
    assert len(said) == 1 and "1 record" in said[0] and "folio status --truncated" in said[0], rep["notices"]
    assert said[0] in err and "(64 tokens)" in said[0]
    listed = run_folio("status", "--truncated", cwd=root).stdout
    assert "notes.md:5-5" in listed, listed
    again, err = index(run_folio, root, srv.url)
    assert again["truncated"] == 0 and "cut" not in err
