"""filters.py on its own: the predicate grammar, matching on the stored source text, the @path rule,
and the per-file verdicts expanded to a record mask. End-to-end behaviour is in test_filters_cli.py."""

from __future__ import annotations

import helpers  # noqa: F401 - puts the repo on sys.path
import numpy as np
import pytest

from folio import filters
from folio.errors import FolioError
from folio.sections import parse_frontmatter

# ------------------------------------------------------------------------------------ grammar


@pytest.mark.parametrize("arg, expected", [
    ("status=live", [("status", "=", "live")]),
    ("status!=live", [("status", "!=", "live")]),
    ("supersedes", [("supersedes", "present", None)]),
    ("!supersedes", [("supersedes", "absent", None)]),
    ("status=Last Call", [("status", "=", "Last Call")]),
    (" status = Final ", [("status", "=", "Final")]),
    ("status=live|status=draft", [("status", "=", "live"), ("status", "=", "draft")]),
    ("status=live|draft", [("status", "=", "live"), ("draft", "present", None)]),
    ("milestone.alpha=v1.21", [("milestone.alpha", "=", "v1.21")]),
    ("url=https://x.org/a=b", [("url", "=", "https://x.org/a=b")]),
    ("replaces=", [("replaces", "=", "")]),
])
def test_parse_reads_every_form(arg, expected):
    w, _ = filters.parse_where(arg)
    assert [(p.key, p.op, p.value) for p in w.alternatives] == expected


@pytest.mark.parametrize("arg, why", [
    ("version>=7", "'>' is not an operator"),
    ("version>7", "'>' is not an operator"),
    ("version<7", "'<' is not an operator"),
    ("title~x", "'~' is not an operator"),
    ("title!~=x", "'!' is not an operator"),
    ("=Final", "needs a key"),
    ("!", "needs a key"),
    ("", "empty alternative"),
    ("status=live|", "empty alternative"),
    ("status==live", "'=='"),
    ("!status=live", "'!' is not an operator"),
    ("status!", "'!' is not an operator"),
])
def test_parse_refuses_what_it_cannot_express_with_the_grammar(arg, why):
    with pytest.raises(FolioError) as e:
        filters.parse([arg])
    msg = str(e.value)
    assert e.value.exit_code == 2
    assert why in msg
    assert repr(arg) in msg
    # one sentence that shows the grammar
    for form in ("key=value", "key!=value", "key (present)", "!key (absent)", "'|'"):
        assert form in msg
    assert "\n" not in msg


def test_bare_word_after_a_comparison_is_a_presence_test_with_a_hint():
    plan = filters.parse(["status=live|draft"])
    assert [str(p) for p in plan.wheres[0].alternatives] == ["status=live", "draft"]
    assert len(plan.hints) == 1
    assert "'status=live|status=draft'" in plan.hints[0]
    assert "\n" not in plan.hints[0]
    # correctly written alternatives earn no hint
    assert filters.parse(["status=live|status=draft"]).hints == ()
    assert filters.parse(["draft|status=live"]).hints == ()


@pytest.mark.parametrize("flags, identity, fragment", [
    ([""], "id", "needs a frontmatter key"),
    (["supersedes=x"], "id", "'=' in it"),
    (["supersedes"], "", "needs a frontmatter key"),
    (["supersedes"], "@file", "is not known"),
])
def test_join_keys_are_checked(flags, identity, fragment):
    with pytest.raises(FolioError) as e:
        filters.parse((), flags, identity)
    assert e.value.exit_code == 2 and fragment in str(e.value)


# ------------------------------------------------------------------------------------ matching


def fm(text: str) -> dict:
    data, _, warning = parse_frontmatter("---\n" + text + "---\n# x\n")
    assert warning is None
    return data


DOC = fm("status: live\ntags: [alpha, beta]\neip: 0001\ncreated: 2019-04-13\nversion: 1.10\n"
         "draft: true\nowner:\nmilestone:\n  alpha: v1.21\ngates:\n  - name: A\n  - name: B\n")


@pytest.mark.parametrize("pred, expected", [
    ("status=live", True),
    ("status=Live", False),  # case-sensitive
    ("status=liv", False),  # exact, not prefix
    ("tags=alpha", True),  # list membership
    ("tags=gamma", False),
    ("tags!=alpha", False),
    ("tags!=gamma", True),
    ("eip=0001", True),  # source text, not a number
    ("eip=1", False),
    ("created=2019-04-13", True),
    ("version=1.10", True),
    ("version=1.1", False),
    ("draft=true", True),
    ("draft=True", True),  # a YAML spelling of the same boolean
    ("draft=false", False),
    ("owner=", True),  # empty value is null
    ("owner=null", True),
    ("owner", True),
    ("milestone.alpha=v1.21", True),
    ("milestone", True),  # a map flattened under the key is present
    ("!milestone", False),
    ("gates.name=B", True),  # a list of maps collects dotted lists
    ("missing!=x", True),  # != passes when the key is absent
    ("missing", False),
    ("!missing", True),
    ("missing=x", False),
    ("status!=live", False),
    ("status!=draft", True),
])
def test_predicates_on_one_document(pred, expected):
    w, _ = filters.parse_where(pred)
    assert filters.where_holds(w, DOC) is expected


def test_alternatives_or_and_hold_on_unannotated_documents():
    w, _ = filters.parse_where("status=retired|!status")
    assert filters.where_holds(w, {})
    assert filters.where_holds(w, {"status": "retired"})
    assert not filters.where_holds(w, {"status": "live"})


# ------------------------------------------------------------------------------- @path identity


@pytest.mark.parametrize("raw, norm", [
    ("/keps/sig-network/536-topology-aware-routing", "keps/sig-network/536-topology-aware-routing"),
    ("/keps/sig-network/536-topology-aware-routing/", "keps/sig-network/536-topology-aware-routing"),
    ("keps/sig-network/536-topology-aware-routing/README.md", "keps/sig-network/536-topology-aware-routing"),
    ("docs\\guide\\index.md", "docs/guide"),
    ("docs/old.md", "docs/old"),
    ("./docs/old.md#section", "docs/old"),
    ("../old/readme.md", "old"),
    ("README.md", ""),
    ("/", ""),
])
def test_normalise_path(raw, norm):
    assert filters.normalise_path(raw) == norm


@pytest.mark.parametrize("pointer, path, hit", [
    ("/keps/sig-network/536-topology-aware-routing", "keps/sig-network/536-topology-aware-routing/README.md", True),
    # the corpus indexed from inside the repository the pointer names
    ("/keps/sig-network/536-topology-aware-routing", "536-topology-aware-routing/README.md", True),
    ("/keps/sig-network/536-topology-aware-routing", "sig-network/536-topology-aware-routing/notes.md", True),
    # a short pointer names the document whose path ends with it
    ("536-topology-aware-routing", "keps/sig-network/536-topology-aware-routing/README.md", True),
    ("https://github.com/k/e/tree/master/keps/sig-network/536-topology-aware-routing",
     "keps/sig-network/536-topology-aware-routing/README.md", True),
    ("/keps/sig-storage/2020-populators.md", "keps/sig-storage/2020-populators.md", True),
    # component boundaries: a tail of a name is not a match
    ("/keps/sig-network/36-topology-aware-routing", "keps/sig-network/536-topology-aware-routing/README.md", False),
    ("/keps/sig-network/536-topology", "keps/sig-network/536-topology-aware-routing/README.md", False),
    # a sibling, a parent's other child, a missing path
    ("/keps/sig-network/2433-topology-aware-hints", "keps/sig-network/536-topology-aware-routing/README.md", False),
    ("/keps/sig-ccc/3456-replaced-kep", "keps/sig-network/536-topology-aware-routing/README.md", False),
    ("n/a", "keps/sig-network/536-topology-aware-routing/README.md", False),
    # a top-level file's directory is the root, which nothing names
    ("/elsewhere", "notes.md", False),
    ("", "notes.md", False),
])
def test_path_pointers(pointer, path, hit):
    ptrs = filters.PathPointers([pointer])
    assert ptrs.names(path) is hit
    assert any(ptrs.points_at(i) for i in filters.path_identities(path)) is hit  # the quick test drops no hit


# ------------------------------------------------------------------------- the mask, in-process


class TableStore:
    """The two read methods filters.apply uses, over an in-memory table (id, path, frontmatter)."""

    def __init__(self, rows):
        self.rows = rows

    def frontmatter_table(self):
        import json

        return [r[0] for r in self.rows], [json.dumps(r[2]) for r in self.rows]

    def paths(self):
        return {r[0]: r[1] for r in self.rows}


REV = TableStore([
    (1, "finance/revenue.md", {"id": "rev-2", "status": "live", "supersedes": ["rev-1"]}),
    (2, "finance/revenue-2019.md", {"id": "rev-1", "status": "retired"}),
    (5, "notes.md", {}),
])


def test_apply_expands_per_file_verdicts_to_records():
    slots = np.array([10, 11, 12, 20, 21, 30], dtype=np.int64)
    files = np.array([1, 1, 1, 2, 2, 5], dtype=np.int64)
    keep, dropped, hints = filters.apply(REV, slots, files, ["status=live"])
    assert keep.tolist() == [True, True, True, False, False, False]
    assert dropped == 0 and hints == []
    keep, dropped, _ = filters.apply(REV, slots, files, ["status!=live"])
    assert keep.tolist() == [False, False, False, True, True, True]  # absent passes
    keep, dropped, _ = filters.apply(REV, slots, files, (), ["supersedes"])
    assert keep.tolist() == [True, True, True, False, False, True]
    assert dropped == 1  # documents, not records: one count for one set of filters
    # the join counts only what --where left, but collects pointers from every file
    keep, dropped, _ = filters.apply(REV, slots, files, ["status!=retired"], ["supersedes"])
    assert keep.tolist() == [True, True, True, False, False, True] and dropped == 0
    # whichever records are candidates (another mode, another question), the documents dropped are the same
    keep, dropped, _ = filters.apply(REV, slots[3:5], files[3:5], (), ["supersedes"])
    assert keep.tolist() == [False, False] and dropped == 1
    keep, dropped, _ = filters.apply(REV, slots[:1], files[:1], (), ["supersedes"])
    assert keep.tolist() == [True] and dropped == 1


def test_apply_path_identity_and_empty_hints():
    store = TableStore([
        (1, "keps/a/1-new/README.md", {"replaces": ["/keps/a/0-old", "/keps/gone/9-missing"]}),
        (2, "keps/a/0-old/README.md", {"status": "replaced"}),
        (3, "keps/a/0-old/notes.md", {}),
        (4, "keps/a/00-old/README.md", {}),
    ])
    slots = np.arange(4, dtype=np.int64)
    files = np.array([1, 2, 3, 4], dtype=np.int64)
    keep, dropped, _ = filters.apply(store, slots, files, (), ["replaces"], "@path")
    assert keep.tolist() == [True, False, False, True] and dropped == 2
    keep, dropped, hints = filters.apply(store, slots, files, ["status=Replaced", "replaces", "stats=x"])
    assert not keep.any()
    assert len(hints) == 2  # 'replaces' matches on its own, the other two do not
    assert "'status=Replaced'" in hints[0] and "status holds replaced (1)" in hints[0]
    assert "'stats=x'" in hints[1] and "did you mean 'status'?" in hints[1]


def test_default_identity_missing_everywhere_says_so():
    store = TableStore([(1, "a/README.md", {"replaces": ["/b"]}), (2, "b/README.md", {})])
    keep, dropped, hints = filters.apply(store, np.arange(2), np.array([1, 2]), (), ["replaces"])
    assert keep.all() and dropped == 0
    assert any("--identity @path" in h for h in hints)


def test_filters_module_stays_pure():
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(filters))
    names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)
             for a in n.names} | {n.module.split(".")[0] for n in ast.walk(tree)
                                  if isinstance(n, ast.ImportFrom) and n.module}
    assert not names & {"click", "httpx", "sqlite3", "subprocess", "os"}
    assert "print(" not in inspect.getsource(filters)



@pytest.mark.parametrize("stored", [
    {"status": "live", "title": 'the "status": quo', "note": ', "status": "x"'},
    {"title": "status", "tags": ["status", "a"], "statuses": "x", "status.x": "y"},
    {"status": ["a", "b"], "milestone.alpha": "v1", "milestone.beta": None, "x": True},
    {"ключ": "значение", "status": "ü", 'a"b': "c"},
    {},
])
def test_reading_only_the_named_keys_agrees_with_decoding_everything(stored):
    # the store writes json.dumps(frontmatter, ensure_ascii=False); spacing may change, keys must not hide
    import json

    for raw in (json.dumps(stored, ensure_ascii=False), json.dumps(stored, separators=(",", ":"), ensure_ascii=False),
                json.dumps(stored, indent=1, ensure_ascii=False)):
        keys = {"status", "milestone", "ключ", 'a"b', "x"}
        got = filters.Frontmatter([1], [raw], keys).get(raw)
        want = {k: v for k, v in stored.items() if any(k == q or k.startswith(q + ".") for q in keys)}
        assert got == want
