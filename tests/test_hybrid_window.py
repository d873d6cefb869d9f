"""Hybrid ranking through the windows (folio/window.py, issue 31) prints what the full path prints.

A large corpus ranks only the records in either plane's best SIZE exactly; these tests lower the
window's threshold and size (FOLIO_WINDOW_MIN, FOLIO_WINDOW_SIZE, private) so a small corpus takes
that path, and hold every printed byte of `--json` (rows, order, scores, component ranks, the
feedback flag) to the full path's (FOLIO_WINDOW_MIN above the corpus): with feedback and without,
ties, merged neighbours, identifier questions, a filter, two corpora together, and a --limit past
the windows (the fallback). Plus a unit test of the windowed arrays against fusion.fuse and
feedback.hybrid on arrays built to tie, with stand-ins and weights.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from test_hybrid import backdate

from folio import feedback, fusion, window

WORDS = ["withdrawal", "validator", "queue", "churn", "deposit", "slashing", "epoch", "block", "header",
         "receipt", "proof", "blob", "gas", "fee", "limit", "balance", "stake", "exit", "credential", "contract",
         "beacon"]
IDENTS = ("MAX_WITHDRAWALS", "process_withdrawal", "BlobSidecar", "get_balance")
FULL = {"FOLIO_WINDOW_MIN": "1000000000"}
# Windows of 40 over ~1,000 records: most questions are decided inside them, some fall back.
SMALL = {"FOLIO_WINDOW_MIN": "0", "FOLIO_WINDOW_SIZE": "40", "FOLIO_FEEDBACK_POOL": "40"}
POOL = {"FOLIO_FEEDBACK_POOL": "40"}


def tree(seed: int, files: int) -> dict[str, str]:
    """Files of a few sections each over one small vocabulary (the lexical plane ranks many
    records, with ties), some identifiers, touching sections that read alike (merged rows), and
    copies of one file (exact ties in both planes)."""
    rng = random.Random(seed)
    out = {}
    for f in range(files):
        parts = [f"---\nkind: {'spec' if f % 3 else 'note'}\n---\n# Doc {f}\n"]
        for _s in range(5):
            words = rng.sample(WORDS, 6) + ([rng.choice(IDENTS)] if rng.random() < 0.3 else [])
            parts.append(f"\n## {' '.join(words[:3])}\n\n{' '.join(words)}.\n")
        out[f"docs/d{f:03d}.md"] = "".join(parts)
    for c in range(3):
        out[f"copies/c{c}.md"] = out["docs/d001.md"]
    return out


@pytest.fixture
def corpora(tmp_path, fake_server, run_folio):
    srv = fake_server()
    roots = []
    for name, seed, files in (("a", 1, 150), ("b", 2, 60)):
        root = tmp_path / name
        for rel, text in tree(seed, files).items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        backdate(root)
        r = run_folio("index", "--endpoint", srv.url, cwd=root)
        assert r.returncode == 0, r.stderr
        roots.append(root)
    return roots


def same(run_folio, cwd, args, env_window, env_full):
    got = run_folio("query", *args, "--json", "--no-refresh", cwd=cwd, env=env_window)
    want = run_folio("query", *args, "--json", "--no-refresh", cwd=cwd, env=env_full)
    assert got.returncode == 0 and want.returncode == 0, got.stderr + want.stderr
    assert got.stdout == want.stdout, args
    return got.stdout


QUESTIONS = ["withdrawal validator queue", "blob gas fee", "beacon", "how does the stake exit",
             "MAX_WITHDRAWALS", "process_withdrawal balance", "nothing matches zzz"]


@pytest.mark.parametrize("feedback_setting", ["auto", "off"])
def test_windowed_hybrid_prints_what_the_full_path_prints(corpora, run_folio, feedback_setting):
    a, b = corpora
    fb = {"FOLIO_FEEDBACK": feedback_setting, **POOL}
    for q in QUESTIONS:
        for limit in ("3", "10"):
            same(run_folio, a, [q, "-l", limit], {**SMALL, **fb}, {**FULL, **fb})
        # the default window (1000) holds the whole corpus: nothing lies outside it
        same(run_folio, a, [q], {"FOLIO_WINDOW_MIN": "0", "FOLIO_FEEDBACK": feedback_setting},
             {**FULL, "FOLIO_FEEDBACK": feedback_setting})


def test_windowed_hybrid_with_a_filter_two_corpora_and_a_limit_past_the_windows(corpora, run_folio):
    a, b = corpora
    for q in QUESTIONS[:4]:
        same(run_folio, a, [q, "--where", "kind=spec", "-l", "8"], SMALL, {**FULL, **POOL})
        same(run_folio, a, [q, "--root", str(a), "--root", str(b), "-l", "8"], SMALL, {**FULL, **POOL})
        out = same(run_folio, a, [q, "-l", "200"], SMALL, {**FULL, **POOL})  # past the windows: the full path ranks
        assert out.count('"rank":') > 6
    # the copies of one file tie in both planes: equal scores and ranks, in path order, both ways
    out = same(run_folio, a, ["Doc 1", "-l", "10"], SMALL, {**FULL, **POOL})
    assert "copies/c0.md" in out and "copies/c2.md" in out


def _full(corpora, qvecs, sem, lex, unjudged, weights, knobs, more=(), candidates=0):
    fused, comp, rest = fusion.fuse(sem, lex, unjudged=unjudged, weights=weights, more=more, candidates=candidates)
    if knobs is not None:
        fused, comp = feedback.hybrid(corpora, qvecs, sem, fused, comp, rest, knobs,
                                      fusion.all_weights(weights, more))
    return np.concatenate(fused), np.concatenate(comp, axis=1)


class _Store:
    def __init__(self, m):
        self.m = m

    def matrix(self):
        return self.m


def test_windowed_arrays_equal_the_full_fusion_and_feedback():
    rng = np.random.default_rng(7)
    decided = decided_facets = 0
    for trial in range(40):
        # some corpora past fusion.N: a list's unit then comes from its best N, the rest below them
        sizes = [int(rng.integers(200, 900)) + (1200 if trial % 4 == 3 else 0) for _ in range(1 + trial % 2)]
        corpora, qvecs, sem, lex, unjudged = [], [], [], [], []
        for n in sizes:
            m = rng.standard_normal((n, 8)).astype(np.float32)
            m[1::7] = m[0]  # identical rows: ties in the semantic plane
            m /= np.linalg.norm(m, axis=1, keepdims=True)
            q = rng.standard_normal(8).astype(np.float32)
            q /= np.linalg.norm(q)
            s = m @ q
            waiting = rng.random(n) < 0.05
            s[waiting | (rng.random(n) < 0.05)] = -np.inf
            x = np.round(rng.random(n + 3) * 4, 1).astype(np.float32)  # coarse: lexical ties
            x[rng.random(n + 3) < 0.5] = -np.inf
            corpora.append(_Store(m))
            qvecs.append(q)
            sem.append(s)
            lex.append(x)
            unjudged.append(np.concatenate([waiting, [True, True, False]]) if trial % 3 else np.zeros(0, bool))
        weights = (0.5, 1.0) if trial % 4 == 1 else None
        knobs = None if trial % 5 == 0 else feedback.Knobs(pool=30)
        size = (30, 60, 2000)[trial % 3]
        # an agent's facets on some trials (issue 40): a passage (semantic) and words (lexical) list
        more = () if trial % 7 < 3 else (
            fusion.Facet("words", [np.where(rng.random(len(x)) < 0.3, np.round(rng.random(len(x)) * 3, 1), -np.inf)
                                   .astype(np.float32) for x in lex], 0.7),
            fusion.Facet("passage", [np.where(np.isfinite(s), np.round(rng.random(len(s)), 2), -np.inf)
                                     .astype(np.float32) for s in sem], 1.3, semantic=True))
        candidates = sum(len(x) for x in lex)  # a BM25 list's best N count the candidates it misses at 0
        want, want_ranks = _full(corpora, qvecs, sem, lex, unjudged, weights, knobs, more, candidates)
        try:
            got, got_ranks, w = window.rank(corpora, qvecs, sem, lex, unjudged, weights, knobs, size, more,
                                            candidates)
        except window.Inexact:
            continue
        decided += 1
        decided_facets += bool(more)
        got, got_ranks = np.concatenate(got), np.concatenate(got_ranks, axis=1)
        inside = np.isfinite(got)
        assert np.array_equal(got[inside], want[inside])  # bit for bit
        assert np.array_equal(got_ranks[:, inside], want_ranks[:, inside])
        assert np.array_equal(w.slots, np.flatnonzero(inside)) and np.array_equal(w.values, got[inside])
        outside = np.flatnonzero(~inside)
        assert (np.round(want[outside], 6) <= w.floor).all()  # -inf too
        assert w.outside == bool(np.isfinite(want[outside]).any()) or w.outside
        offsets = np.cumsum([0, *[len(x) for x in lex]])
        for g in outside[:: max(1, len(outside) // 50)]:
            c = int(np.searchsorted(offsets, g, side="right") - 1)
            v = w.score(c, int(g - offsets[c]))
            assert (v is None and want[g] == -np.inf) or v == float(want[g])
            assert tuple(w.both[:, g]) == tuple(want_ranks[:, g])
    assert decided >= 20 and decided_facets >= 5
