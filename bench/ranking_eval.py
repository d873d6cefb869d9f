"""Ranking quality on the labeled sets, per set and per half (tune / held), per mode (issue 28).

Every question of bench/labelsets.py's sets goes through folio's real query path against indexes
built through llama-server (all-MiniLM-L6-v2), by default under /tmp/labels-idx/<corpus> (see
`--build` and /tmp/labels-idx/README.txt):

- `--via mcp` (the default): one warm `folio mcp --root <corpus>` per corpus, driven by the MCP
  SDK's stdio client, `query` with the mode, limit 10. The same answer object as
  `folio query --json`, without a process start per question.
- `--via cli`: one `folio query Q --json -l 10 --mode M` process per question, plus any extra
  flags given after `--` (a variant that is a CLI flag needs this path).

`--env K=V` (repeatable) is set for every folio process (a variant switched by an environment
variable works on both paths). FOLIO_* variables of the calling shell are NOT passed on, and
XDG_CONFIG_HOME points at an empty directory, so only what the command line says is measured.

A row answers a target when it is in the target's file and its line range overlaps the target
section's (a merged row holding the section counts; a divided section counts by any piece). Each
target is credited once, to the first row that reaches it. Per question: reciprocal rank of the
first row reaching a grade-2 target (MRR@10), nDCG@10 with gains 2^grade - 1 over the question's
targets, recall@10 (share of its targets, any grade, reached in the top 10) and hit@1 (the answer
is the first row). Precision (issue 39; the rules above count a row that reaches a target however
broad it is): the lines handed out (the top row's, and the top 5 rows' together, mean per question)
and the strict MRR@10 and strict hit@1, where a row reaching a grade-2 target counts only if it is at
most STRICT (2) times the target section's length (a whole-file target: any row in the file), and the
lines read to the answer: every row's lines down to the first that reaches a grade-2 target, all the
rows' when none of the ten does (what a reader reading top-down pays to reach it). Cost:
median client wall time per query and mean CPU of the folio process per query (the server's
embedding time is in the wall time, not in the CPU).

    python bench/ranking_eval.py                                  # every set, both halves, 3 modes
    python bench/ranking_eval.py --sets identifiers,keps-sections --halves tune
    python bench/ranking_eval.py --env FOLIO_FEEDBACK=1 --label "feedback on" --record
    python bench/ranking_eval.py --via cli --label "new flag" -- --some-new-flag
    python bench/ranking_eval.py --build http://127.0.0.1:18480/v1/embeddings   # (re)index first
    python bench/ranking_eval.py --modes hybrid --facets words,passage           # agent facets (issue 40)

`--facets words,passage` (issue 40) asks every question once per combination of those facets
(question only, +words, +passage, +both), each facet as bench/labels/facets.yaml holds it for the
question (written from the question alone, before any run): `words` and `passage` on the MCP
query tool, `--words`/`--passage` on the CLI. A combination is reported as a mode of its own
(`hybrid+words`, ...). Facet weights are set with `--env FOLIO_FACET_WEIGHTS=words=W,passage=W`.

`--json FILE` writes every question's ranks (and each answer's `feedback` and confidence block: which
questions the lexical plane was sure of); `--against FILE` compares this run with such a file
question by question (per set, half and mode: the MRR/nDCG change and how many answers moved up or
down); `--record` appends the tables to docs/benchmarks.md. Choose on `tune`; the held half is the
final check, and a choice that helps only `tune` is not kept.

The llama-server's vectors depend slightly on what else it is batching: while it was also indexing,
3 of 780 ranked lists differed from a quiet run (one answer moved, rank 2 -> 5). Compare variants
against a server that is doing nothing else; on a quiet server repeated runs were identical.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

HERE = str(Path(__file__).resolve().parent)
sys.path.insert(0, HERE)
import common  # noqa: E402
import corpora  # noqa: E402
import labelsets  # noqa: E402

# bench/mcp.py would shadow the MCP SDK: drop this folder from the path before the SDK is imported.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]

DEFAULT_IDX = Path("/tmp/labels-idx")
MODES = ("semantic", "lexical", "hybrid")
LIMIT = 10
STRICT = 2  # a strict hit: the row is at most this many times the target section's length
CORPORA = ("rust-book", "eips", "keps")
FACETS_FILE = Path(HERE) / "labels" / "facets.yaml"


def facet_combos(names: list[str]) -> list[tuple[str, ...]]:
    """Every combination of the facets named, the question alone first, in the order named."""
    from itertools import combinations

    return [c for n in range(len(names) + 1) for c in combinations(names, n)]


def variant(mode: str, combo: tuple[str, ...]) -> str:
    """A mode and a combination of facets as one reported mode: `hybrid`, `hybrid+words`, ..."""
    return "+".join((mode, *combo))


def load_facets() -> dict:
    """{(corpus, question): {"words": ..., "passage": ...}} from bench/labels/facets.yaml."""
    import yaml

    data = yaml.safe_load(FACETS_FILE.read_text(encoding="utf-8"))
    return {(corpus, q): f for corpus, qs in data.items() for q, f in qs.items()}


def environment(idx: Path, extra: list[str]) -> dict:
    for k in [k for k in os.environ if k.startswith("FOLIO_")]:
        del os.environ[k]  # common.measure merges os.environ back in
    env = dict(os.environ)
    (idx / "xdg").mkdir(parents=True, exist_ok=True)
    env["XDG_CONFIG_HOME"] = str(idx / "xdg")
    for kv in extra:
        k, sep, v = kv.partition("=")
        if not sep:
            sys.exit(f"--env {kv!r}: expected NAME=VALUE")
        env[k] = v
    return env


def build(idx: Path, url: str, env: dict, names: list[str]) -> None:
    """Copy each corpus from /tmp/folio-bench (read-only there) and index it through `url`."""
    for name in names:
        root = idx / name
        if not root.is_dir():
            src = corpora.unpack(name)
            tmp = idx / f".{name}.copy"
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.copytree(src, tmp, ignore=shutil.ignore_patterns(".folio"))
            tmp.rename(root)
        t = time.perf_counter()
        m = common.folio(["index", str(root), "--endpoint", url, "--jobs", "2"], root, env, timeout=6 * 3600)
        print(f"indexed {name} in {time.perf_counter() - t:.0f} s: {m.stdout.strip()}", file=sys.stderr)


# --- scoring ------------------------------------------------------------------------------------

def credit(rows: list[dict], targets) -> list[tuple[int, int]]:
    """(rank, grade) of each target reached, each target credited once to the first row reaching it
    (the highest grade first when one row reaches several)."""
    left = list(targets)
    out = []
    for r in rows:
        hit = [t for t in left if t.path == r["path"] and r["start"] <= t.end and r["end"] >= t.start]
        if hit:
            best = max(hit, key=lambda t: t.grade)
            left.remove(best)
            out.append((r["rank"], best.grade))
    return out


def span(row: dict) -> int:
    return row["end"] - row["start"] + 1


def strict_rank(rows: list[dict], targets) -> int | None:
    """Rank of the first row reaching a grade-2 target while at most STRICT times its length."""
    for r in rows:
        if any(t.grade == 2 and t.path == r["path"] and r["start"] <= t.end and r["end"] >= t.start
               and span(r) <= STRICT * (t.end - t.start + 1) for t in targets):
            return r["rank"]
    return None


def score(rows: list[dict], targets) -> dict:
    rows = rows[:LIMIT]
    got = credit(rows, targets)
    first = min((rank for rank, g in got if g == 2), default=None)
    strict = strict_rank(rows, targets)
    dcg = sum((2 ** g - 1) / math.log2(rank + 1) for rank, g in got)
    ideal = sorted((t.grade for t in targets), reverse=True)[:LIMIT]
    idcg = sum((2 ** g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
    return {"rank": first, "rr": 1 / first if first else 0.0, "ndcg": dcg / idcg if idcg else 0.0,
            "recall": len(got) / len(targets), "hit1": 1.0 if first == 1 else 0.0,
            "strict": strict, "srr": 1 / strict if strict else 0.0, "shit1": 1.0 if strict == 1 else 0.0,
            "top1": sum(span(r) for r in rows[:1]), "top5": sum(span(r) for r in rows[:5]),
            "read": sum(span(r) for r in (rows[:first] if first else rows))}


METRICS = ("rr", "ndcg", "recall", "hit1", "srr", "shit1", "top1", "top5", "read")


def summary(scores: list[dict]) -> dict:
    n = len(scores)
    return {"n": n, **{k: sum(s[k] for s in scores) / n if n else 0.0 for k in METRICS}}


# --- the two query paths ------------------------------------------------------------------------

class CliPath:
    def __init__(self, roots: dict[str, Path], env: dict, flags: list[str]):
        self.roots, self.env, self.flags = roots, env, flags

    async def ask(self, corpus: str, q: str, mode: str, facets: dict | None = None) -> tuple[dict, float, float]:
        extra = [a for k, flag in (("words", "--words"), ("passage", "--passage")) if k in (facets or {})
                 for a in (flag, facets[k])]
        m = common.folio(["query", q, "--json", "-l", str(LIMIT), "--mode", mode, *extra, *self.flags],
                         self.roots[corpus], self.env)
        return json.loads(m.stdout), m.wall, m.cpu

    async def close(self) -> None:
        pass


class McpPath:
    """One warm `folio mcp --root <corpus>` per corpus, opened on first use."""

    def __init__(self, roots: dict[str, Path], env: dict):
        from contextlib import AsyncExitStack

        self.roots, self.env = roots, env
        self.stack = AsyncExitStack()
        self.clients: dict[str, tuple] = {}

    async def _client(self, corpus: str):
        if corpus not in self.clients:
            from mcp.client import Client
            from mcp.client.stdio import StdioServerParameters

            cmd = common.folio_cmd()
            params = StdioServerParameters(command=cmd[0], args=[*cmd[1:], "mcp", "--root", str(self.roots[corpus])],
                                           cwd=str(self.roots[corpus]), env=self.env)
            client = await self.stack.enter_async_context(Client(params, read_timeout_seconds=600))
            known = {pid for _, pid in self.clients.values() if pid}
            pid = common.mcp_server_pid(known)
            await client.call_tool("query", {"query": "warm up", "limit": 1})  # index mapped, connection open
            self.clients[corpus] = (client, pid)
        return self.clients[corpus]

    async def ask(self, corpus: str, q: str, mode: str, facets: dict | None = None) -> tuple[dict, float, float]:
        client, pid = await self._client(corpus)
        c = common.cpu_of(pid)
        t = time.perf_counter()
        got = await client.call_tool("query", {"query": q, "limit": LIMIT, "mode": mode, **(facets or {})})
        wall = time.perf_counter() - t
        if got.is_error:
            raise RuntimeError(f"{corpus}: query {q!r}: {got.content[0].text}")
        return got.structured_content, wall, common.cpu_of(pid) - c

    async def close(self) -> None:
        await self.stack.aclose()


async def run(questions: list, modes: list[str], path, combos=((),), facets: dict | None = None) -> dict:
    """{(set, half, mode): [score, ...]}, {(mode): [wall]}, {(mode): [cpu]}, per-question records.
    `combos`: the combinations of facets each mode is asked with (`facets`: each question's), each
    reported as a mode of its own (variant)."""
    scores: dict = {}
    asked = [(m, c) for m in modes for c in combos]
    walls: dict = {variant(m, c): [] for m, c in asked}
    cpus: dict = {variant(m, c): [] for m, c in asked}
    records = []
    try:
        for i, q in enumerate(questions):
            rec = {"set": q.set, "half": q.half, "q": q.q, "corpus": q.corpus, "shape": q.shape, "modes": {}}
            own = (facets or {}).get((q.corpus, q.q), {})
            for j in range(len(asked)):  # rotate the order so the load falls on every mode alike
                mode, combo = asked[(i + j) % len(asked)]
                if any(f not in own for f in combo):
                    raise RuntimeError(f"{FACETS_FILE} holds no {'/'.join(combo)} for {q.corpus}: {q.q!r}")
                answer, wall, cpu = await path.ask(q.corpus, q.q, mode, {f: own[f] for f in combo})
                if combo and sorted(answer.get("facets", [])) != sorted(combo):
                    raise RuntimeError(f"asked with {combo}, ranked with {answer.get('facets')}: {answer.get('notices')}")
                name = variant(mode, combo)
                if answer["mode"] != mode:
                    raise RuntimeError(f"asked for {mode}, ranked {answer['mode']}: {answer.get('notices')} "
                                       "(is the embeddings server the index recorded up?)")
                s = score(answer["results"], q.targets)
                scores.setdefault((q.set, q.half, name), []).append(s)
                walls[name].append(wall)
                cpus[name].append(cpu)
                rec["modes"][name] = {"rank": s["rank"], "ndcg": round(s["ndcg"], 4), "strict": s["strict"],
                                      "top1": s["top1"], "top5": s["top5"], "read": s["read"],
                                      "feedback": answer.get("feedback"),
                                      "confidence": answer.get("confidence"),
                                      "rows": [f"{r['path']}:{r['start']}-{r['end']}" for r in answer["results"]]}
            records.append(rec)
            if (i + 1) % 25 == 0:
                print(f"  {i + 1}/{len(questions)} questions", file=sys.stderr)
    finally:
        await path.close()
    return {"scores": scores, "walls": walls, "cpus": cpus, "records": records}


# --- report ---------------------------------------------------------------------------------------

def table(got: dict, sets: list[str], halves: list[str], modes: list[str]) -> list[str]:
    """One row per set, half and mode, then per half the same over every set: per question, and
    averaged over the sets (each set weighing one)."""
    lines = ["| set | half | n | mode | MRR@10 | nDCG@10 | recall@10 | hit@1 | strict MRR@10 | strict hit@1 | "
             "lines, top row | lines, top 5 | lines to the answer |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    cells = {}
    for half in halves:
        for name in sets:
            rows = {m: summary(got["scores"].get((name, half, m), [])) for m in modes}
            if any(r["n"] for r in rows.values()):
                cells[name, half] = rows
    for half in halves:
        per_set = [rows for (_, h), rows in cells.items() if h == half]
        if len(per_set) > 1:
            cells["every set, per question", half] = {m: summary([s for name in sets for s in got["scores"].get(
                (name, half, m), [])]) for m in modes}
            cells["every set, averaged over the sets", half] = {m: {"n": "", **{k: sum(r[m][k] for r in per_set) / len(
                per_set) for k in METRICS}} for m in modes}
    for (name, half), rows in cells.items():
        best = max(r["rr"] for r in rows.values())
        for m in modes:
            r = rows[m]
            mrr = f"**{r['rr']:.3f}**" if r["rr"] == best and len(modes) > 1 else f"{r['rr']:.3f}"
            lines.append(f"| {name} | {half} | {r['n']} | {m} | {mrr} | {r['ndcg']:.3f} | {r['recall']:.3f} | "
                         f"{r['hit1']:.3f} | {r['srr']:.3f} | {r['shit1']:.3f} | {r['top1']:.1f} | {r['top5']:.1f} | "
                         f"{r['read']:.1f} |")
    return lines


def agreement(got: dict, halves: list[str], modes: list[str], base: str = "semantic") -> list[str]:
    """Lines handed out, each mode beside `base` (semantic mode: the narrowest rows), split by which of
    the two answers first: where both do, a wider row is the mode's own doing; where only the mode
    does, it is the answer's length against the base's (wrong) row's."""
    if base not in modes:
        return []
    lines = [f"| half | mode | first row right | n | lines, top row (mode / {base}) | lines, top 5 (mode / {base}) | "
             f"lines to the answer (mode / {base}) |", "|---|---|---|---|---|---|---|"]
    cases = (("both", True, True), ("this mode only", True, False), (f"{base} only", False, True),
             ("neither", False, False))
    for half in halves:
        recs = [r["modes"] for r in got["records"] if r["half"] == half]
        for m in (m for m in modes if m != base):
            for label, mine, theirs in cases:
                xs = [r for r in recs if (r[m]["rank"] == 1) == mine and (r[base]["rank"] == 1) == theirs]
                if xs:
                    t1 = statistics.fmean(r[m]["top1"] for r in xs), statistics.fmean(r[base]["top1"] for r in xs)
                    t5 = statistics.fmean(r[m]["top5"] for r in xs), statistics.fmean(r[base]["top5"] for r in xs)
                    rd = statistics.fmean(r[m]["read"] for r in xs), statistics.fmean(r[base]["read"] for r in xs)
                    lines.append(f"| {half} | {m} | {label} | {len(xs)} | {t1[0]:.1f} / {t1[1]:.1f} | "
                                 f"{t5[0]:.1f} / {t5[1]:.1f} | {rd[0]:.1f} / {rd[1]:.1f} |")
    return lines


def cost_lines(got: dict, modes: list[str], via: str) -> list[str]:
    lines = ["| mode | queries | wall per query, median (p90) | folio CPU per query, mean |", "|---|---|---|---|"]
    for m in modes:
        w, c = sorted(got["walls"][m]), got["cpus"][m]
        if not w:
            continue
        p90 = w[min(len(w) - 1, int(0.9 * (len(w) - 1)))]
        lines.append(f"| {m} | {len(w)} | {statistics.median(w) * 1000:.0f} ms ({p90 * 1000:.0f} ms) | "
                     f"{statistics.fmean(c) * 1000:.0f} ms |")
    return lines + ["", f"Cost through `--via {via}`" + (" (a warm `folio mcp`: no process start)" if via == "mcp" else
                                                         " (a whole `folio query` process each)") + "."]


def against(got: dict, path: Path, modes: list[str]) -> list[str]:
    """Paired per-question comparison with an earlier run's --json: per set, half and mode, the MRR@10
    and nDCG@10 change and how many questions moved up, down or not at all (a question's reciprocal
    rank). The questions both runs asked are compared; a change that moves few questions is noise."""
    before = {(r["set"], r["q"]): r["modes"] for r in json.loads(path.read_text())["questions"]}
    cells: dict = {}
    for r in got["records"]:
        old = before.get((r["set"], r["q"]))
        for m in modes:
            if not old or m not in old or m not in r["modes"]:
                continue
            was, now = old[m], r["modes"][m]
            rr = [1 / x["rank"] if x["rank"] else 0.0 for x in (was, now)]
            c = cells.setdefault((r["set"], r["half"], m), {"n": 0, "drr": 0.0, "dndcg": 0.0, "up": 0, "down": 0,
                                                             "dsrr": 0.0, "dtop5": 0.0, "precise": 0})
            c["n"] += 1
            c["drr"] += rr[1] - rr[0]
            c["dndcg"] += now["ndcg"] - was["ndcg"]
            c["up"] += rr[1] > rr[0]
            c["down"] += rr[1] < rr[0]
            if "top5" in was:  # runs before issue 39 kept no precision
                c["precise"] += 1
                c["dsrr"] += (1 / now["strict"] if now["strict"] else 0.0) - (1 / was["strict"] if was["strict"] else 0.0)
                c["dtop5"] += now["top5"] - was["top5"]
    lines = [f"Against {path} (paired, same questions):", "",
             "| set | half | mode | n | ΔMRR@10 | ΔnDCG@10 | answer moved up | down | Δstrict MRR@10 | Δlines, top 5 |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for (name, half, m), c in cells.items():
        n, p = c["n"], c["precise"]
        lines.append(f"| {name} | {half} | {m} | {n} | {c['drr'] / n:+.3f} | {c['dndcg'] / n:+.3f} | {c['up']} | "
                     f"{c['down']} | " + (f"{c['dsrr'] / p:+.3f} | {c['dtop5'] / p:+.1f} |" if p else "| |"))
    return lines


def index_sizes(roots: dict[str, Path], env: dict, used: set[str]) -> str:
    out = []
    for name in sorted(used):
        st = json.loads(common.folio(["status", "--json"], roots[name], env).stdout)
        out.append(f"{name}: {st['files']} files, {st['sections']} records ({st.get('model') or '?'})")
    return "; ".join(out)


def main() -> None:
    import anyio

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default=",".join(labelsets.SETS), help="comma-separated (default every set)")
    ap.add_argument("--halves", default="tune,held")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--idx", type=Path, default=DEFAULT_IDX, help="directory holding rust-book/, eips/, keps/ indexes")
    ap.add_argument("--via", choices=("mcp", "cli"), help="query path (default mcp; cli when flags follow --)")
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="set for every folio process")
    ap.add_argument("--label", default="", help="what this run measures (goes into the recorded heading)")
    ap.add_argument("--build", metavar="URL", help="copy and index the corpora through this endpoint first")
    ap.add_argument("--json", type=Path, help="write every question's ranks here")
    ap.add_argument("--against", type=Path, metavar="JSON", help="compare, question by question, with an earlier --json")
    ap.add_argument("--record", action="store_true", help="append the table to docs/benchmarks.md")
    ap.add_argument("--section", default="Ranking: labeled sets", help="heading of the recorded section")
    ap.add_argument("--corpora", default=",".join(CORPORA),
                    help="ask only the questions on these corpora (comma-separated; default every one)")
    ap.add_argument("--facets", default="", metavar="words,passage",
                    help="also ask with these agent facets (bench/labels/facets.yaml), every combination")
    ap.add_argument("flags", nargs=argparse.REMAINDER, help="-- then extra `folio query` flags (implies --via cli)")
    a = ap.parse_args()
    flags = a.flags[1:] if a.flags[:1] == ["--"] else a.flags
    via = a.via or ("cli" if flags else "mcp")
    if flags and via == "mcp":
        sys.exit("extra query flags need --via cli (the MCP query tool takes no CLI flags)")
    env = environment(a.idx, a.env)
    roots = {c: a.idx / c for c in CORPORA}
    sets, halves, modes = a.sets.split(","), a.halves.split(","), a.modes.split(",")
    unknown = [s for s in sets if s not in labelsets.SETS]
    if unknown:
        sys.exit(f"unknown set(s) {', '.join(unknown)}: choose from {', '.join(labelsets.SETS)}")
    if a.build:  # the corpora the chosen sets ask about, read from the shared unpacked copies
        sources = {c: corpora.unpack(c) for c in CORPORA}
        build(a.idx, a.build, env, sorted({q.corpus for name in sets for q in labelsets.load(name, sources)}
                                         & set(a.corpora.split(","))))
    asked = {c: r for c, r in roots.items() if c in a.corpora.split(",")}  # another corpus's index need not exist
    questions = [q for name in sets for q in labelsets.load(name, asked) if q.half in halves]
    used = {q.corpus for q in questions}
    missing = [c for c in used if not (roots[c] / ".folio").is_dir()]
    if missing:
        sys.exit(f"no index under {', '.join(str(roots[c]) for c in missing)}: run with --build URL "
                 f"(see {a.idx}/README.txt)")
    questions.sort(key=lambda q: q.corpus)  # one warm server at a time is enough
    print(f"{len(questions)} questions x {len(modes)} modes via {via} ({common.load()})", file=sys.stderr)
    load0 = common.load()
    path = CliPath(roots, env, flags) if via == "cli" else McpPath(roots, env)
    combos = facet_combos([f for f in a.facets.split(",") if f]) if a.facets else [()]
    facets = load_facets() if a.facets else None
    t = time.perf_counter()
    got = anyio.run(run, questions, modes, path, combos, facets)
    took = time.perf_counter() - t
    modes = [variant(m, c) for m in modes for c in combos]  # each combination reported as a mode
    lines = table(got, sets, halves, modes)
    agreed = agreement(got, halves, modes)
    lines += ["", *agreed] if agreed else []
    costs = cost_lines(got, modes, via)
    if a.against:
        costs += ["", *against(got, a.against, modes)]
    print("\n".join(lines + [""] + costs))
    if a.json:
        a.json.write_text(json.dumps({"label": a.label, "env": a.env, "flags": flags, "via": via,
                                      "questions": got["records"]}, indent=1))
    if a.record:
        described = ", ".join([*a.env, *flags]) or "none (defaults)"
        rows = [("indexes", index_sizes(roots, env, used)),
                ("server", "llama-server b11434, all-MiniLM-L6-v2 f16 (`--embeddings`, default flags); indexes built "
                           "with default `folio index` settings, `--jobs 2`"),
                ("variant", f"{a.label + ': ' if a.label else ''}{described}"),
                ("sets", f"bench/labelsets.py ({len(questions)} questions, halves {a.halves}); limit {LIMIT} rows"),
                ("run", f"{took:.0f} s; {load0} at the start, {common.load()} at the end (2 cores shared)")]
        common.record(a.section + (f" ({a.label})" if a.label else ""), rows, extra=[*lines, "", *costs],
                      note="bench/ranking_eval.py. MRR@10 counts the first row reaching a grade-2 target; nDCG@10 "
                           "gains 2^grade-1; recall@10 the share of a question's targets (any grade) in the top "
                           "10; hit@1 the answer first; strict: only a row at most twice the target section's "
                           "length counts; lines: the top row's and the top 5 rows' (mean per question). "
                           "Choose on `tune`; `held` is the check.")


if __name__ == "__main__":
    main()
