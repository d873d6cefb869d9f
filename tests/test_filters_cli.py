"""`folio query --where / --exclude-pointed-by / --identity` end to end: the real CLI against the
deterministic fake embeddings server (filters do not depend on the model).

The whole-corpus checks compare the documents folio selects with an independent reading of the
frontmatter done here (PyYAML's BaseLoader on the files themselves), for every predicate form.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import yaml
from helpers import FakeServer, run_folio, write_tree

QUERY = "when is revenue recognised"
LIMIT = 1000  # the CLI's maximum --limit

REVENUE = {
    "finance/revenue.md": (
        "---\nid: rev-2\nstatus: live\nsupersedes: [rev-1]\n---\n"
        "# Revenue recognition\n\nRevenue is recognised when control passes.\n"
    ),
    "finance/revenue-2019.md": (
        "---\nid: rev-1\nstatus: retired\n---\n"
        "# Revenue recognition (2019 policy)\n\n"
        "Revenue is recognised when the invoice is sent, once payment terms are agreed.\n"
    ),
}


def ok(proc):
    assert proc.returncode == 0, proc.stderr
    return proc


def rows(proc) -> list[str]:
    """path:start-end of each row printed by --paths-only."""
    return [line for line in ok(proc).stdout.splitlines() if line]


def docs(refs) -> set[str]:
    return {r.rsplit(":", 1)[0] for r in refs}


def query(root, *args):
    return run_folio("query", *args, cwd=root)


@pytest.fixture
def revenue(tmp_path, fake_server):
    srv = fake_server()
    root = write_tree(tmp_path / "corpus", REVENUE)
    ok(run_folio("index", "--endpoint", srv.url, cwd=root))
    return root, srv


# ------------------------------------------------------------------------- the seed's fixture


def test_revenue_without_filters_ranks_the_retired_definition_right_under_the_live_one(revenue):
    root, _ = revenue
    got = rows(query(root, QUERY, "--paths-only"))
    assert docs(got[:1]) == {"finance/revenue.md"}
    assert docs(got[1:2]) == {"finance/revenue-2019.md"}


def test_revenue_where_status_live_leaves_only_the_live_definition(revenue):
    root, _ = revenue
    proc = query(root, QUERY, "--where", "status=live", "--paths-only")
    assert docs(rows(proc)) == {"finance/revenue.md"}
    assert "dropped" not in proc.stderr  # --where alone is no join


def test_revenue_exclude_pointed_by_supersedes_drops_the_retired_one_and_says_so(revenue):
    root, _ = revenue
    proc = query(root, QUERY, "--exclude-pointed-by", "supersedes")
    assert "finance/revenue.md:" in ok(proc).stdout
    assert "revenue-2019" not in proc.stdout
    assert "(1 document dropped by --exclude-pointed-by supersedes, --identity id)" in proc.stderr.splitlines()
    data = json.loads(ok(query(root, QUERY, "--exclude-pointed-by", "supersedes", "--json")).stdout)
    assert data["dropped"] == 1
    assert [r["path"] for r in data["results"]] == ["finance/revenue.md"]
    assert data["results"][0]["frontmatter"] == {"id": "rev-2", "status": "live", "supersedes": ["rev-1"]}


def test_drop_count_is_printed_even_when_nothing_is_dropped(revenue):
    root, _ = revenue
    proc = query(root, QUERY, "--exclude-pointed-by", "replaces", "--paths-only")
    assert len(rows(proc)) == 2
    assert "(0 documents dropped by --exclude-pointed-by replaces, --identity id)" in proc.stderr
    assert "no document in the index has a 'replaces' key" in proc.stderr


def test_the_join_collects_pointers_from_documents_where_removed(revenue):
    root, _ = revenue
    # the successor is filtered out by --where, yet its pointer still retires the predecessor
    proc = query(root, QUERY, "--where", "status=retired", "--exclude-pointed-by", "supersedes", "--json")
    data = json.loads(ok(proc).stdout)
    assert data["results"] == [] and data["dropped"] == 1


def test_lexical_mode_applies_the_same_filters(revenue):
    root, _ = revenue
    assert docs(rows(query(root, QUERY, "--lexical", "--paths-only"))) == {
        "finance/revenue.md", "finance/revenue-2019.md"}
    assert docs(rows(query(root, QUERY, "--lexical", "--where", "status=retired", "--paths-only"))) == {
        "finance/revenue-2019.md"}
    proc = query(root, QUERY, "--lexical", "--exclude-pointed-by", "supersedes", "--paths-only")
    assert docs(rows(proc)) == {"finance/revenue.md"}
    assert "(1 document dropped" in proc.stderr


def test_lexical_fallback_when_the_server_is_down_still_filters(revenue):
    root, srv = revenue
    srv.stop()
    proc = query(root, QUERY, "--where", "status=retired", "--paths-only")
    assert "ranking lexically" in proc.stderr
    assert docs(rows(proc)) == {"finance/revenue-2019.md"}


# ------------------------------------------------------------------------------ refusals, hints


@pytest.mark.parametrize("flags", [
    ["--where", "version>=7"],
    ["--where", "=live"],
    ["--where", "status=live|"],
    ["--where", "status==live"],
    ["--where", "status=live", "--where", "a<b"],
    ["--exclude-pointed-by", "supersedes=rev-1"],
    ["--exclude-pointed-by", "supersedes", "--identity", "@file"],
])
def test_a_predicate_folio_cannot_express_is_refused_before_any_request(revenue, flags):
    root, srv = revenue
    before = srv.stats()["requests"]
    proc = query(root, QUERY, *flags)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("folio: ")
    assert "Traceback" not in proc.stderr
    if flags[0] == "--where":
        assert "key=value" in lines[0] and "!key (absent)" in lines[0] and "'|'" in lines[0]
    assert srv.stats()["requests"] == before  # refused before the question was embedded


def test_bare_word_alternative_prints_a_one_line_hint(revenue):
    root, _ = revenue
    proc = query(root, QUERY, "--where", "status=live|draft", "--paths-only")
    assert docs(rows(proc)) == {"finance/revenue.md"}  # `draft` is a presence test nobody passes
    hints = [ln for ln in proc.stderr.splitlines() if "status=live|status=draft" in ln]
    assert len(hints) == 1 and "'draft' is a whole predicate" in hints[0]
    data = json.loads(ok(query(root, QUERY, "--where", "status=live|draft", "--json")).stdout)
    assert any("status=live|status=draft" in n for n in data["notices"])


def test_an_empty_result_names_each_where_that_matches_nothing_on_its_own(revenue):
    root, _ = revenue
    proc = query(root, QUERY, "--where", "status=Live", "--where", "id=rev-2", "--where", "stauts=live")
    assert ok(proc).stdout == ""
    err = proc.stderr
    assert "no section matched" in err
    assert "--where 'status=Live' matches no section on its own" in err
    assert "status holds live (1), retired (1)" in err  # case-sensitive: say what is there
    assert "--where 'stauts=live' matches no section on its own" in err
    assert "did you mean 'status'?" in err
    assert "'id=rev-2' matches" not in err  # it matches on its own
    # each matches something, only together nothing
    proc = query(root, QUERY, "--where", "status=live", "--where", "id=rev-1")
    assert ok(proc).stdout == ""
    assert "no section passes every --where together" in proc.stderr


def test_filters_read_the_frontmatter_as_refreshed(revenue):
    root, _ = revenue
    assert docs(rows(query(root, QUERY, "--where", "status=live", "--paths-only"))) == {"finance/revenue.md"}
    path = root / "finance/revenue.md"
    path.write_text(path.read_text().replace("status: live", "status: retired"))
    proc = query(root, QUERY, "--where", "status=live", "--paths-only")
    # the frontmatter changed, no section's text did: re-indexed, nothing re-embedded
    assert "1 file(s) re-indexed before answering, nothing re-embedded" in proc.stderr
    assert rows(proc) == []


def test_identity_path_drops_what_a_path_pointer_names_and_ignores_missing_paths(tmp_path, fake_server):
    srv = fake_server()
    root = write_tree(tmp_path / "c", {
        "docs/new/README.md": ("---\nreplaces:\n  - /docs/old\n  - /docs/never-written\n  - n/a\n"
                               "  - https://example.org/docs/legacy.md\n---\n# Layout\n\nThe workspace layout.\n"),
        "docs/old/README.md": "# Layout (old)\n\nThe workspace layout, old.\n",
        "docs/old/appendix.md": "# Layout appendix\n\nMore on the workspace layout.\n",
        "docs/legacy.md": "# Layout (legacy)\n\nThe legacy workspace layout.\n",
        "docs/older/README.md": "# Layout (older)\n\nThe older workspace layout.\n",
        "index.md": "# Index\n\nWorkspace layout index.\n",
    })
    ok(run_folio("index", "--endpoint", srv.url, cwd=root))
    everything = docs(rows(query(root, "workspace layout", "--paths-only", "-l", "50")))
    assert len(everything) == 6
    proc = query(root, "workspace layout", "--paths-only", "-l", "50", "--exclude-pointed-by", "replaces",
                 "--identity", "@path")
    assert docs(rows(proc)) == {"docs/new/README.md", "docs/older/README.md", "index.md"}
    assert "(3 documents dropped by --exclude-pointed-by replaces, --identity @path)" in proc.stderr
    # the same pointers read as ids drop nothing, and the CLI says what to do
    proc = query(root, "workspace layout", "--paths-only", "-l", "50", "--exclude-pointed-by", "replaces")
    assert docs(rows(proc)) == everything
    assert "--identity @path" in proc.stderr


def test_several_roots_one_join_and_no_false_empty_reason(tmp_path, fake_server):
    srv = fake_server()
    old = write_tree(tmp_path / "old", {"revenue-2019.md": REVENUE["finance/revenue-2019.md"]})
    new = write_tree(tmp_path / "new", {"revenue.md": REVENUE["finance/revenue.md"]})
    for root in (old, new):
        ok(run_folio("index", "--endpoint", srv.url, cwd=root))
    both = ["--root", old, "--root", new]
    assert len(rows(query(tmp_path, QUERY, *both, "--paths-only"))) == 2
    # the successor in one index retires its predecessor in the other
    proc = query(tmp_path, QUERY, *both, "--exclude-pointed-by", "supersedes", "--json")
    data = json.loads(ok(proc).stdout)
    assert [r["path"] for r in data["results"]] == ["revenue.md"] and data["dropped"] == 1
    # a --where that matches in one index only is no empty result, so no reason is given
    proc = query(tmp_path, QUERY, *both, "--where", "status=live", "--paths-only")
    assert docs(rows(proc)) == {"new/revenue.md"}
    assert "matches no section" not in proc.stderr
    proc = query(tmp_path, QUERY, "--root", old, "--where", "status=live", "--paths-only")
    assert rows(proc) == [] and "--where 'status=live' matches no section on its own" in proc.stderr


# -------------------------------------------------------------------------- whole corpora


@pytest.fixture(scope="module")
def server():
    srv = FakeServer()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def indexed(corpus, server, tmp_path_factory):
    """indexed("eips") -> root of a private copy, indexed once per module with the fake server."""
    import shutil

    built: dict[str, Path] = {}
    home = tmp_path_factory.mktemp("home")
    env = {"HOME": home, "XDG_CONFIG_HOME": home / ".config"}
    env.update({k: None for k in os.environ if k.startswith("FOLIO_")})

    def get(name: str) -> Path:
        if name not in built:
            root = tmp_path_factory.mktemp("idx") / name
            shutil.copytree(corpus(name), root)
            ok(run_folio("index", "--endpoint", server.url, cwd=root, env=env, timeout=900))
            built[name] = root
        return built[name]

    return get


# --- an independent reading of the frontmatter: PyYAML BaseLoader keeps every scalar's source text

_FM = re.compile(r"\A\ufeff?---[ \t\r]*\n(.*?)^(?:---|\.\.\.)[ \t\r]*$", re.S | re.M)
TRUE, FALSE, NULL = {"true", "True", "TRUE"}, {"false", "False", "FALSE"}, {"null", "Null", "NULL", "~", ""}


def flatten(data: dict, prefix: str = "") -> dict:
    out: dict = {}
    for k, v in data.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        elif isinstance(v, list):
            for item in v:
                if isinstance(item, dict):
                    for sub, sv in flatten(item).items():
                        out.setdefault(f"{key}.{sub}", []).extend(sv if isinstance(sv, list) else [sv])
            scalars = [x for x in v if not isinstance(x, dict | list)]
            if scalars or all(not isinstance(x, dict) for x in v):
                out[key] = scalars
        else:
            out[key] = v
    return out


def read_frontmatter(path: Path) -> dict:
    m = _FM.match(path.read_text(encoding="utf-8"))
    if not m:
        return {}
    try:
        data = yaml.load(m.group(1), Loader=yaml.BaseLoader)  # noqa: S506 - constructs no objects
    except yaml.YAMLError:
        return {}  # folio indexes such a file without frontmatter
    return flatten(data) if isinstance(data, dict) else {}


def same_text(source: str, text: str) -> bool:
    if source == text:
        return True
    return any(source in spell and text in spell for spell in (TRUE, FALSE, NULL))


def ref_holds(pred: str, fm: dict) -> bool:
    def present(key):
        return key in fm or any(k.startswith(key + ".") for k in fm)

    def equal(key, text):
        v = fm.get(key)
        if key not in fm:
            return False
        return any(same_text(x, text) for x in v) if isinstance(v, list) else same_text(v, text)

    for alt in pred.split("|"):
        if "!=" in alt:
            key, text = alt.split("!=", 1)
            if not equal(key, text):
                return True
        elif "=" in alt:
            key, text = alt.split("=", 1)
            if equal(key, text):
                return True
        elif alt.startswith("!"):
            if not present(alt[1:]):
                return True
        elif present(alt):
            return True
    return False


def reference(root: Path, wheres: list[str]) -> set[str]:
    out = set()
    for p in root.rglob("*.md"):
        rel = p.relative_to(root).as_posix()
        if rel.startswith(".folio/"):
            continue
        fm = read_frontmatter(p)
        if all(ref_holds(w, fm) for w in wheres):
            out.add(rel)
    return out


def where_flags(wheres):
    return [x for w in wheres for x in ("--where", w)]


EIPS = [  # (predicates ANDed, True: every selected row fits under --limit so the sets compare exactly)
    (["status=Withdrawn"], True),
    (["status=Last Call|status=Living"], True),
    (["withdrawal-reason"], True),
    (["!description", "status=Withdrawn"], True),
    (["!discussions-to"], True),
    (["status=Withdrawn", "withdrawal-reason!=Superseded by EIP-8141"], True),
    (["created=2018-04-20"], True),
    (["eip=1559"], True),
    (["requires=1559"], True),
    (["eip=01559"], True),  # source text, not a number: nothing
    (["status=final"], True),  # case-sensitive: nothing
    (["status!=Withdrawn"], False),
    (["category!=Core", "status!=Moved"], False),
]

KEPS = [
    (["status=replaced|status=withdrawn"], True),
    (["!kep-number"], True),
    (["milestone.alpha=v1.9"], True),
    (["participating-sigs=sig-windows"], True),
    (["feature-gates.name=TopologyAwareHints"], True),
    (["superseded-by", "owning-sig=sig-scheduling"], True),
    (["disable-supported=false", "owning-sig=sig-network"], True),
    (["approvers=@thockin", "stage!=stable", "owning-sig=sig-network"], True),
    (["milestone", "!milestone.alpha", "owning-sig=sig-node"], True),
    (["creation-date=2018-10-24"], True),
    (["status!=implemented", "owning-sig!=sig-node"], False),
]


@pytest.mark.parametrize("name, cases", [("eips", EIPS), ("keps", KEPS)])
def test_every_predicate_form_selects_what_an_independent_reading_selects(indexed, name, cases):
    root = indexed(name)
    for wheres, exact in cases:
        expected = reference(root, wheres)
        proc = query(root, "the specification and its motivation", *where_flags(wheres), "-l", LIMIT,
                     "--paths-only")
        got = rows(proc)
        assert docs(got) <= expected, wheres
        if exact:
            assert len(got) < LIMIT, f"{wheres}: pick a narrower predicate for an exact comparison"
        if len(got) < LIMIT:  # every candidate is listed: the sets compare exactly
            assert docs(got) == expected, wheres
            if not expected:
                assert "matches no section on its own" in proc.stderr


@pytest.mark.parametrize("name, text, cases", [("eips", "precompile", EIPS), ("keps", "kustomize", KEPS)])
def test_lexical_mode_filters_identically(indexed, name, text, cases):
    root = indexed(name)

    def ranked(*flags):
        data = json.loads(ok(query(root, text, "--lexical", "-l", LIMIT, "--json", *flags)).stdout)
        assert data["mode"] == "lexical"
        return data["results"]

    everything = ranked()
    assert 0 < len(everything) < LIMIT  # every lexical candidate is listed
    for wheres, _ in cases:
        expected = reference(root, wheres)
        got = ranked(*where_flags(wheres))
        # the same rows with the same scores, minus exactly those of unselected documents
        want = [(r["ref"], r["score"]) for r in everything if r["path"] in expected]
        assert sorted((r["ref"], r["score"]) for r in got) == sorted(want), wheres


def test_limit_counts_rows_that_pass_the_filter(indexed):
    root = indexed("eips")
    withdrawn = reference(root, ["status=Withdrawn"])
    text = "gas cost of storage"
    # cosine scores do not depend on the other candidates (fused ranks do): semantic, to compare them
    ranked = json.loads(ok(query(root, text, "-l", LIMIT, "--json", "--mode", "semantic")).stdout)["results"]
    assert sum(r["path"] in withdrawn for r in ranked[:10]) < 10  # filtering after top-k would come up short
    filtered = json.loads(ok(query(root, text, "--where", "status=Withdrawn", "-l", 10, "--json", "--mode",
                                   "semantic")).stdout)
    got = [(r["ref"], r["score"]) for r in filtered["results"]]
    assert len(got) == 10
    want = [(r["ref"], r["score"]) for r in ranked if r["path"] in withdrawn][:10]
    assert sorted(got, key=lambda x: -x[1]) == sorted(want, key=lambda x: -x[1])


# --- the precedence join by path on KEPs


def resolve(root: Path, pointer: str) -> set[str]:
    """Where a reader would land following a path pointer: the longest tail of it that exists
    under the root, as a directory (its Markdown files) or a Markdown file."""
    parts = [c for c in pointer.strip().split("/") if c]
    for i in range(len(parts)):
        target = root.joinpath(*parts[i:])
        if target.is_dir():
            return {p.relative_to(root).as_posix() for p in target.glob("*.md")}
        for f in (target, target.with_name(target.name + ".md")):
            if f.is_file() and f.suffix == ".md":
                return {f.relative_to(root).as_posix()}
    return set()


def test_exclude_pointed_by_replaces_with_path_identity_on_keps(indexed):
    root = indexed("keps")
    pointers = []
    for p in root.rglob("*.md"):
        v = read_frontmatter(p).get("replaces")
        pointers += v if isinstance(v, list) else [v] if v else []
    replaced = set().union(*(resolve(root, p) for p in pointers if p))
    assert "keps/sig-network/536-topology-aware-routing/README.md" in replaced
    missing = [p for p in pointers if p and not resolve(root, p)]
    assert len(missing) > 10  # URLs, 'n/a', '/keps/sig-ccc/3456-replaced-kep', ...

    text = "topology aware routing"
    join = ["--exclude-pointed-by", "replaces", "--identity", "@path"]
    plain = json.loads(ok(query(root, text, "-l", LIMIT, "--json")).stdout)
    assert plain["results"][0]["path"] == "keps/sig-network/536-topology-aware-routing/README.md"
    proc = ok(query(root, text, "-l", LIMIT, "--json", *join))
    data = json.loads(proc.stdout)
    assert len(data["results"]) == LIMIT
    assert not {r["path"] for r in data["results"]} & replaced
    assert f"({data['dropped']} documents dropped by --exclude-pointed-by replaces, --identity @path)" in proc.stderr
    # exactly the documents whose paths resolve went (missing paths dropped nothing), whatever the mode
    assert data["dropped"] == len(replaced) > 0
    lexical = json.loads(ok(query(root, text, "-l", LIMIT, "--json", "--mode", "lexical", *join)).stdout)
    assert lexical["dropped"] == data["dropped"]
    # the successor, 2433, stays
    assert "keps/sig-network/2433-topology-aware-hints/README.md" in {r["path"] for r in data["results"]}
