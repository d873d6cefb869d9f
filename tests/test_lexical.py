"""Unit tests for the lexical plane (folio/lexical/): pure functions, no I/O."""

from __future__ import annotations

import math
import random
import time

import numpy as np
import pytest

from folio import lexical as lx
from folio.lexical import (
    K1,
    WEIGHTS,
    B,
    analyze,
    build_segment,
    confidence,
    merge_segments,
    query_terms,
    score,
    tokenize_path,
)

# --------------------------------------------------------------------------- reference


def ref_bm25f(query, docs):
    """Independent BM25F: docs = {slot: (body, heading, title, path, context)} (live only)."""
    fields = [
        {
            s: analyze(" ".join(tokenize_path(t)) if f == 3 else t)
            for s, d in docs.items()
            for t in [d[f]]
        }
        for f in range(5)
    ]
    n = len(docs)
    avg = [sum(len(v) for v in fields[f].values()) / n if n else 0 for f in range(5)]
    scores = {s: 0.0 for s in docs}
    for term in dict.fromkeys(query):
        df = sum(1 for s in docs if any(term in fields[f][s] for f in range(5)))
        if df == 0:
            continue
        idf = math.log((n - df + 0.5) / (df + 0.5) + 1)
        for s in docs:
            tft = 0.0
            for f in range(5):
                tf = fields[f][s].count(term)
                if tf:
                    norm = 1 - B + B * len(fields[f][s]) / avg[f]
                    tft += WEIGHTS[f] * tf / norm
            if tft:
                scores[s] += idf * tft * (K1 + 1) / (tft + K1)
    return scores


VOCAB = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "install",
    "installing",
    "installed",
    "configure",
    "configuration",
    "server",
    "client",
    "running",
    "runs",
    "run",
    "independent",
    "independence",
    "cache",
    "caching",
    "token",
    "tokens",
    "network",
    "latency",
    "retry",
    "retries",
    "timeout",
    "mesh",
    "helix",
    "route",
    "routes",
    "index",
    "indexing",
    "vector",
    "vectors",
    "search",
    "query",
    "queries",
    "section",
    "sections",
    "heading",
]


def make_doc(rng: random.Random, slot: int):
    def words(k):
        return " ".join(rng.choice(VOCAB) for _ in range(k))

    return (
        slot,
        words(rng.randint(0, 40)) + " The end.",
        words(rng.randint(1, 4)),
        words(rng.randint(1, 3)),
        f"docs/ch{rng.randint(1, 9):02d}-{rng.choice(VOCAB)}.md",
        words(rng.randint(0, 3)),
    )


QUERIES = [
    "install the server",
    "configuration of caching and retries",
    "independence running",
    "helix mesh route timeout",
    "ch03 docs",
    "zxqvbl alpha",
    "vectors vectors vectors search",
]


def check(segments, live, state):
    """score() over (segments, live) == reference over state (slot -> doc), every query."""
    live_docs = {s: d[1:] for s, d in state.items() if s < len(live) and live[s]}
    for q in QUERIES:
        terms = analyze(q)
        got = score(terms, segments, live)
        assert got.dtype == np.float32 and got.shape == (len(live),)
        ref = ref_bm25f(terms, live_docs)
        want = np.zeros(len(live))
        for s, v in ref.items():
            want[s] = v
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=q)
        assert np.all(got[~np.asarray(live)] == 0)
        # and a clean build of the same live state agrees too
        clean = build_segment([state[s] for s in sorted(live_docs)])
        np.testing.assert_allclose(score(terms, [clean], live), got, rtol=1e-5, atol=1e-6)


def test_reference_clean_build():
    rng = random.Random(1)
    docs = [make_doc(rng, s) for s in range(20)]
    seg = build_segment(docs)
    live = np.ones(20, dtype=bool)
    check([seg], live, {d[0]: d for d in docs})
    assert np.all(np.diff(seg["terms"].astype(np.float64)) > 0)
    assert seg["offsets"][-1] == len(seg["post_doc"]) == len(seg["post_tf"])


def test_reference_incremental_and_merge():
    rng = random.Random(7)
    state = {s: make_doc(rng, s) for s in range(20)}
    segments = [build_segment(list(state.values()))]
    live = np.ones(20, dtype=bool)
    check(segments, live, state)

    # re-index slots 3 and 7 in place (slot reuse: newest segment wins)
    edits = [make_doc(rng, 3), make_doc(rng, 7)]
    state.update({d[0]: d for d in edits})
    segments.append(build_segment(edits))
    check(segments, live, state)

    # delete 5 and 12 (absent from live, postings still on disk)
    live[[5, 12]] = False
    check(segments, live, state)

    # append new slots 20, 21
    new = [make_doc(rng, 20), make_doc(rng, 21)]
    state.update({d[0]: d for d in new})
    live = np.r_[live, True, True]
    segments.append(build_segment(new))
    check(segments, live, state)

    # compaction of the first two segments
    merged = merge_segments(segments[:2], live)
    assert set(merged["doc_slots"].tolist()) == {s for s in range(20) if live[s]}
    segments = [merged, segments[2]]
    check(segments, live, state)

    # edit after the merge, reusing a slot held by the merged segment and by seg3
    more = [make_doc(rng, 0), make_doc(rng, 21)]
    state.update({d[0]: d for d in more})
    segments.append(build_segment(more))
    check(segments, live, state)

    # a slot that was dead comes back to life with new content
    back = [make_doc(rng, 5)]
    state[5] = back[0]
    live[5] = True
    segments.append(build_segment(back))
    check(segments, live, state)

    # full merge of everything
    full = merge_segments(segments, live)
    check([full], live, state)
    assert sorted(full["doc_slots"].tolist()) == full["doc_slots"].tolist()


def test_merge_with_renumber():
    rng = random.Random(3)
    docs = [make_doc(rng, s) for s in range(12)]
    seg_a = build_segment(docs[:8])
    seg_b = build_segment(docs[8:])
    live = np.ones(12, dtype=bool)
    live[[2, 9]] = False
    renumber = np.full(12, -1)
    renumber[live] = np.arange(int(live.sum()))
    merged = merge_segments([seg_a, seg_b], live, renumber=renumber)
    new_live = np.ones(int(live.sum()), dtype=bool)
    new_state = {int(renumber[d[0]]): (int(renumber[d[0]]), *d[1:]) for d in docs if live[d[0]]}
    check([merged], new_live, new_state)


def test_merge_in_many_term_ranges_is_the_same_segment(monkeypatch):
    """A big merge gathers postings one term-hash range at a time (bounded memory); the
    ranges must not show in the result: same arrays as one range, same scores as the reference."""
    rng = random.Random(11)
    state = {s: make_doc(rng, s) for s in range(60)}
    segments = [build_segment([state[s] for s in range(i, i + 15)]) for i in range(0, 60, 15)]
    edits = [make_doc(rng, s) for s in (4, 33, 59)]
    state.update({d[0]: d for d in edits})
    segments.append(build_segment(edits))
    live = np.ones(60, dtype=bool)
    live[[9, 40]] = False
    whole = merge_segments(segments, live)
    monkeypatch.setattr(lx, "MERGE_CHUNK", 5)
    ranged = merge_segments(segments, live)
    assert whole.keys() == ranged.keys()
    for key in whole:
        assert whole[key].dtype == ranged[key].dtype
        np.testing.assert_array_equal(whole[key], ranged[key])
    check([ranged], live, state)


def test_empty_inputs():
    seg = build_segment([])
    live = np.zeros(0, dtype=bool)
    assert score(["alpha"], [seg], live).shape == (0,)
    assert score(["alpha"], [], np.ones(3, bool)).tolist() == [0, 0, 0]
    m = merge_segments([seg], live)
    assert len(m["doc_slots"]) == 0
    only_stop = build_segment([(0, "the of and", "", "", "", "")])
    assert len(only_stop["terms"]) == 0
    assert only_stop["doc_len"].tolist() == [[0, 0, 0, 0, 0]]


def test_duplicate_slot_in_one_build_last_wins():
    seg = build_segment([(0, "alpha", "", "", "", ""), (0, "beta", "", "", "", "")])
    live = np.ones(1, bool)
    assert term_stats(["alpha", "beta"], [seg], live) == {"alpha": 0, "beta": 1}


def test_term_stats_live_only():
    docs = [
        (0, "alpha beta", "", "", "", ""),
        (1, "alpha", "", "", "", ""),
        (2, "gamma", "", "", "", ""),
    ]
    seg = build_segment(docs)
    live = np.array([True, False, True])
    assert term_stats(["alpha", "gamma", "zz", "alpha"], [seg], live) == {
        "alpha": 1,
        "gamma": 1,
        "zz": 0,
    }


# --------------------------------------------------------------------------- analyzer


def test_stemming_meets():
    assert analyze("independent")[0] == analyze("independence")[0] == analyze("independently")[0]
    assert (
        len({analyze(w)[0] for w in ("recognise", "recognised", "recognize", "recognition")}) == 1
    )
    assert len({analyze(w)[0] for w in ("run", "runs", "running")}) == 1
    assert len({analyze(w)[0] for w in ("configure", "configured", "configuration")}) == 1
    assert len({analyze(w)[0] for w in ("apply", "applies", "applied")}) == 1
    assert analyze("cats") != analyze("dogs")


def test_case_folding_and_unicode():
    assert analyze("HELLO Hello hello") == analyze("hello") * 3
    assert analyze("Straße") == analyze("STRASSE") == analyze("strasse")
    assert analyze("日本") == ["日本"]
    assert analyze("Ünïcödé café") == analyze("ünïcödé CAFÉ")
    assert analyze("v2 ch03 404") == ["v2", "ch03", "404"]
    assert analyze("snake_case") == analyze("snake case") + ["snake_case"]  # its parts, then the whole


def test_identifiers_are_terms_whole_and_by_their_parts():
    assert analyze("HASH_OPCODE_GAS") == analyze("hash opcode gas") + ["hash_opcode_gas"]
    assert analyze("getUserName") == [analyze("getusername")[0], *analyze("get user name")]
    assert analyze("HTTPServer") == ["httpserver", *analyze("http server")]
    assert analyze("--dry-run") == analyze("dry run") + ["dry-run"]
    assert analyze("EIP-4844.") == ["eip", "4844", "eip-4844"]
    assert analyze("memory.swap.max") == analyze("memory swap max") + ["memory.swap.max"]
    assert analyze("Rc<T>") == ["rc", "rc<t>"] and analyze("Vec<Vec<u8>>")[-1] == "vec<vec<u8>>"
    assert analyze("v1.2.3") == ["v1", "2", "3", "v1.2.3"]
    assert analyze("Rc::strong_count")[-2:] == ["strong_count", "rc::strong_count"]
    assert analyze("eth/68") == ["eth", "68", "eth/68"]
    # punctuation around plain words is no identifier
    assert analyze("the end. (see <div>notes</div>) and/or") == analyze("end see div notes div") + ["and/or"]
    assert analyze("Box<dyn Error>") == analyze("box dyn error")  # no whole name across a space


def test_stopwords_dropped():
    assert analyze("the of and to a") == []
    assert analyze("What is the mesh") == analyze("mesh")


def test_query_terms_keep_surface():
    qt = query_terms("How do I configure mTLS and the Configuration zxqvbl?")
    assert [s for s, _ in qt] == ["configure", "mTLS", "zxqvbl"]  # Configuration folds in
    assert qt[0][1] == analyze("configuration")[0]


def test_tokenize_path():
    assert tokenize_path("docs/ch03-01-variables.md") == ["docs/ch03-01-variables"]
    assert analyze(" ".join(tokenize_path("docs/ch03-01-variables.md"))) == analyze("docs ch03 01 variables") + [
        "ch03-01-variables", "docs/ch03-01-variables"]
    assert tokenize_path("a\\b_c.markdown") == ["a", "b_c"]


# --------------------------------------------------------------------------- confidence

CORPUS = [
    (
        0,
        "Helix gives per-route timeouts and circuit breaking.",
        "Why we chose Helix",
        "Mesh",
        "docs/mesh.md",
        "",
    ),
    (1, "The cache stores vectors on disk.", "Cache", "Store", "docs/store.md", ""),
    (2, "Retries use exponential backoff.", "Retries", "Network", "docs/net.md", ""),
    (3, "Retries use exponential backoff.", "Retries", "Network", "docs/net2.md", ""),
]


def run(q):
    seg = build_segment(CORPUS)
    live = np.ones(len(CORPUS), bool)
    s = score(analyze(q), [seg], live)
    order = np.argsort(-s, kind="stable")[:3]
    return confidence(q, order, s[order], [seg], live, separation_floor=lx.DEFAULT_SEPARATION_FLOOR)


def test_confidence_none():
    c = run("kubernetes zxqvbl")
    assert c["band"] == "none" and c["answerable"] is False
    assert c["support"] == 0 and c["separation"] == 0.0 and c["coverage"] == 0.0


def test_confidence_partial_names_missing():
    c = run("helix timeouts zxqvbl")
    assert c["band"] == "partial" and c["answerable"] is True
    assert c["missing"] == ["zxqvbl"]
    assert 0 < c["coverage"] < 1
    assert c["support"] == 1 and c["separation"] == 1.0


def test_confidence_weak_on_ties():
    c = run("exponential backoff")
    assert c["band"] == "weak"
    assert c["separation"] == 0.0 and c["support"] == 2


def test_confidence_grounded():
    c = run("why helix")
    assert c["band"] == "grounded"
    assert c["coverage"] == 1.0 and c["doc_coverage"] == 1.0 and c["missing"] == []
    assert set(c) >= {"separation_floor", "doc_coverage_floor"}


def test_confidence_doc_coverage_floor_and_stale():
    seg = build_segment(CORPUS)
    live = np.ones(4, bool)
    q = "helix cache"
    s = score(analyze(q), [seg], live)
    order = np.argsort(-s, kind="stable")[:2]
    c = confidence(q, order, s[order], [seg], live, separation_floor=0.0, doc_coverage_floor=0.9)
    assert c["coverage"] == 1.0 and c["doc_coverage"] < 0.9 and c["band"] == "partial"
    c = confidence(q, order, s[order], [seg], live, separation_floor=0.0, verified="stale")
    assert c["band"] == "partial" and c["verified"] == "stale"


def test_confidence_semantic_support_counts_term_rows():
    seg = build_segment(CORPUS)
    live = np.ones(4, bool)
    # cosine similarities: rows 1 and 0 mention no query word, row 2 does
    slots = np.array([1, 0, 2])
    cos = np.array([0.81, 0.62, 0.40], dtype=np.float32)
    c = confidence("exponential retries", slots, cos, [seg], live, separation_floor=0.1)
    assert c["support"] == 1
    assert c["doc_coverage"] == 0.0  # top row mentions neither word
    assert c["separation"] == round((0.81 - 0.62) / 0.81, 4)
    assert c["band"] == "grounded"
    c = confidence("exponential", np.array([1, 0]), cos[:2], [seg], live, separation_floor=0.1)
    assert c["support"] == 0 and c["band"] == "none"


# --------------------------------------------------------------------------- performance


@pytest.mark.slow
def test_performance_sanity(capsys):
    rng = np.random.default_rng(0)
    vocab = np.array(
        [f"w{i}x{'abcdefgh'[i % 8]}ing" if i % 5 == 0 else f"term{i}" for i in range(30000)]
    )
    n = 100_000
    zipf = np.minimum(rng.zipf(1.2, size=n * 60), len(vocab)) - 1
    lens = rng.integers(20, 100, size=n)
    starts = np.r_[0, np.cumsum(lens)]
    words = vocab[zipf[: starts[-1]]].tolist()
    docs = [
        (
            i,
            " ".join(words[starts[i] : starts[i + 1]]),
            f"Heading {words[starts[i]]}",
            "Title of the document",
            f"docs/ch{i % 30:02d}-{words[starts[i] + 1]}.md",
            "Parent Section",
        )
        for i in range(n)
    ]
    mb = sum(len(d[1]) + len(d[2]) + len(d[3]) + len(d[4]) + len(d[5]) for d in docs) / 1e6
    lx._RAW_CACHE.clear()
    clock = time.process_time  # CPU time: the test machine may be shared
    t0 = clock()
    seg = build_segment(docs)
    t_build = clock() - t0
    t0 = clock()
    build_segment(docs)
    t_build_warm = clock() - t0
    live = np.ones(n, dtype=bool)
    live[::17] = False
    q = [vocab[0], vocab[3], vocab[50], vocab[2000]]
    terms = analyze(" ".join(q))
    s = score(terms, [seg], live)
    reps = 10
    t0 = clock()
    for _ in range(reps):
        s = score(terms, [seg], live)
    t_query = (clock() - t0) / reps
    # split in 10 incremental segments: same scores
    step = n // 10
    segs = [build_segment(docs[i : i + step]) for i in range(0, n, step)]
    t0 = clock()
    for _ in range(reps):
        s10 = score(terms, segs, live)
    t_query10 = (clock() - t0) / reps
    np.testing.assert_allclose(s10, s, rtol=1e-5)
    t0 = clock()
    merged = merge_segments(segs, live)
    t_merge = clock() - t0
    np.testing.assert_allclose(score(terms, [merged], live), s, rtol=1e-5)
    with capsys.disabled():
        print(
            f"\nlexical perf (CPU s): {n} docs, {mb:.1f} MB, {len(seg['post_doc'])} postings; "
            f"build {t_build:.2f}s cold ({mb / t_build:.1f} MB/s), {t_build_warm:.2f}s warm; "
            f"4-term query {t_query * 1e3:.1f} ms (1 segment), {t_query10 * 1e3:.1f} ms "
            f"(10 segments); merge 10 segments {t_merge:.2f}s"
        )


def test_build_tokenisation_matches_analyze():
    texts = [
        "word—other “quoted” naïve_snake café-au-lait Straße 日本語のテキスト",
        "emoji 🚀rocket x²+y² ½ ǅungla İstanbul ﬁle ٣٤ (parens) [link](http://a.b/c_d)",
        "`code` **bold** __dunder__ a.b,c;d:e!f?g 'it''s' 12.5% v1.2.3 -- --flag",
        "",
    ]
    docs = [(i, t, t[:12], t[-9:], "dir/naïve-path_x.md", t[5:30]) for i, t in enumerate(texts)]
    seg = build_segment(docs)
    for i, t in enumerate(texts):
        row = seg["doc_len"][list(seg["doc_slots"]).index(i)].tolist()
        want = [len(analyze(x)) for x in (t, t[:12], t[-9:], " ".join(tokenize_path(docs[i][4])), t[5:30])]
        assert row == want, t
    live = np.ones(len(texts), bool)
    for t in texts:
        terms = analyze(t)
        stats = term_stats(terms, [seg], live)
        assert all(v > 0 for v in stats.values()), (t, stats)


def term_stats(query, segments, live) -> dict[str, int]:
    """df over live docs per distinct analysed term, as the scorer's collection sees it."""
    col = lx.Collection(segments, live)
    return {t: sum(len(p[1]) for p in col.postings(t)) for t in dict.fromkeys(query)}


def test_confidence_merged_row_holds_the_terms_of_all_its_records():
    seg = build_segment(CORPUS)
    live = np.ones(4, bool)
    # one merged row made of records 1 (cache) and 0 (helix): the top row holds both words
    c = confidence("helix cache", [(1, 0), (2,)], np.array([0.9, 0.2]), [seg], live, separation_floor=0.0,
                   doc_coverage_floor=0.9)
    assert c["doc_coverage"] == 1.0 and c["support"] == 1 and c["band"] == "grounded"
    c = confidence("helix cache", [(1,), (0,)], np.array([0.9, 0.2]), [seg], live, separation_floor=0.0,
                   doc_coverage_floor=0.9)
    assert c["doc_coverage"] < 0.9 and c["support"] == 2 and c["band"] == "partial"


def test_merge_equals_a_clean_build_array_for_array():
    rng = random.Random(5)
    state = {s: make_doc(rng, s) for s in range(300)}
    segs = [build_segment([state[s] for s in range(i, min(300, i + 37))]) for i in range(0, 300, 37)]
    edits = [make_doc(rng, s) for s in (3, 40, 41, 299)]
    state.update({d[0]: d for d in edits})
    segs.append(build_segment(edits))
    live = np.ones(300, bool)
    live[[7, 8, 100]] = False
    merged = merge_segments(segs, live)
    clean = build_segment([state[s] for s in range(300) if live[s]])
    assert merged.keys() == clean.keys()
    for key in clean:
        assert merged[key].dtype == clean[key].dtype, key
        np.testing.assert_array_equal(merged[key], clean[key], err_msg=key)


def test_a_big_files_records_are_analysed_in_parts_into_the_same_segment(monkeypatch):
    """A parse worker analyses a big file's records PART_CHARS of text at a time (tokenising holds
    ~30 bytes per byte) and merges the parts: the segment is the one analysed at once."""
    from folio.lexical import segments as sg
    from folio.sections import parse_document

    texts = ["".join(f"## Topic {f}-{i}\n\nwidget{i} gadget{f} and the harbour ferry {i * f}\n\n" for i in range(300))
             for f in range(3)]
    files = [(parse_document(t), t, f"f{f}.md") for f, t in enumerate(texts)]
    whole, starts = sg.files_segment(files)
    monkeypatch.setattr(sg, "PART_CHARS", 2000)
    parted, parted_starts = sg.files_segment(files)
    assert parted_starts == starts and sorted(parted) == sorted(whole)
    for k in whole:
        assert np.array_equal(np.asarray(parted[k]), np.asarray(whole[k])), k
