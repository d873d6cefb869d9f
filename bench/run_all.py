"""The benchmark table: one command runs every figure of issue 8 and appends dated rows to
docs/benchmarks.md (machine, corpus, commit, load average).

    .venv/bin/python bench/run_all.py                      # everything, every corpus
    .venv/bin/python bench/run_all.py --corpora keps,md-119k --skip zero-cost,jobs --no-record

Corpora: rust-book, eips, keps, md-119k (the first files of md-history in path order until
119,000 records) and md-history (all 16,013 files), copied under /tmp/folio-bench/perf/ and
indexed there; NAME@DIM (md-119k@384) is the same corpus at another dimension, in its own copy. Vectors come from tests/fakeserver.py at --dim (768): its feature-hashing model
for the index the queries run on, its --cheap table for the zero-cost throughput runs (a hard
linked copy of the tree, so the two indexes never mix). The initial index of md-119k and
md-history is built once and reused (its figures are kept in <corpus>.index.json beside it and
reported with the date and commit they were measured at); --reindex builds them again.

Every figure is a whole process (`folio ...` or the bare script), reaped with wait4 so its own
CPU time and peak RSS are read. Medians with min-max. CPU time (user+sys) is printed beside wall
time because it barely moves with the machine's load, and wall time does.

Figures per corpus:
- parse floor: markdown-it block parse alone (MB/s, headings/s) and folio's sectioning (records/s), CPU
- index: wall, folio CPU, server CPU, sections/s (wall, per folio CPU second), peak RSS, .folio/ size
- zero-cost index: the same against --cheap (folio's own work: sections per folio CPU second)
- --jobs scaling (keps by default): --cheap with 20 ms added per request, jobs 1, 2, 4, 8
- no-op re-index (and whether it imported numpy/httpx), one changed file, one renamed file
- query: 100+ distinct queries (headings of the corpus), folio vs the bare baseline script
  (bench/baseline_query.py) interleaved; median, worst, ratio, folio minus bare by stage
  (FOLIO_TIMINGS=1), peak RSS with and without the mapped matrix
- filtered (--where on the commonest frontmatter pair) and lexical (--lexical) queries, status

At the end it runs bench/freshness.py, bench/lexical.py and bench/contamination.py when they exist
(their owners' scripts record their own rows).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import corpora  # noqa: E402

BASE = Path(os.environ.get("FOLIO_BENCH_DIR") or "/tmp/folio-bench/perf")
ALL = ("rust-book", "eips", "keps", "md-119k", "md-history")
DEFAULT = ("rust-book", "eips", "keps", "md-119k", "md-119k@384", "md-history")
CACHED = ("md-119k", "md-history")  # initial index built once, reused
TARGET_119K = 119_000
# Other owners' scripts, run at the end when present: (name, args, records its own rows?)
OTHERS = (("freshness", [], False), ("lexical", [], False), ("contamination", [], True), ("filter_cost", [], True))
STAGES = ("startup", "imports", "config", "records", "request", "scan", "merge", "hydrate", "stat", "close", "render")


def env() -> dict:
    e = {k: v for k, v in os.environ.items() if not k.startswith("FOLIO_")}
    e["XDG_CONFIG_HOME"] = str(BASE / "xdg")
    e["FOLIO_TIMINGS"] = "1"
    return e


ENV = None  # set in main


def log(msg: str) -> None:
    print(msg, flush=True)


def ms(x: float) -> str:
    return f"{x * 1000:.1f}"


def spread(values: list[float], unit: str = "ms", scale: float = 1000.0, digits: int = 1) -> str:
    med = statistics.median(values)
    return (f"{med * scale:.{digits}f} {unit} ({min(values) * scale:.{digits}f}-{max(values) * scale:.{digits}f}, "
            f"n={len(values)})")


def mib(b: float) -> str:
    return f"{b / 2**20:.0f} MiB"


# --------------------------------------------------------------------------- corpora


def bare_query_cmd(root: Path, m: dict) -> list[str]:
    """The floor: bench/baseline_query.py, one scan of the index's matrix in a process of its own."""
    return [sys.executable, str(Path(__file__).resolve().parent / "baseline_query.py"),
            str(matrix_path(root, m)), m["rows"], m["dim"], m["endpoint"], m["model"]]


def files_for_records(target: int, cache: Path | None = None) -> int:
    """How many md-history files, in path order, hold `target` records (cached in `cache`)."""
    cache = cache or BASE / "md-119k.json"
    if cache.exists():
        return json.loads(cache.read_text())["files"]
    from folio import sections

    root = corpora.unpack("md-history")
    total = n = 0
    for p in corpora.markdown_files(root):
        text, _ = sections.decode(p.read_bytes())
        total += len(sections.parse_document(text, 8000).records)
        n += 1
        if total >= target:
            break
    cache.write_text(json.dumps({"files": n, "records": total}))
    return n


def split_name(name: str, dim: int) -> tuple[str, int, str]:
    """'md-119k@384' -> ('md-119k', 384, 'md-119k-d384'): a corpus at another dimension gets its
    own copy and index; the plain name uses --dim."""
    base, _, d = name.partition("@")
    if base not in ALL:
        sys.exit(f"unknown corpus {base}; one of {', '.join(ALL)} (optionally @DIM)")
    return base, int(d or dim), base + (f"-d{d}" if d else "")


def prepare(base: str, name: str) -> Path:
    """BASE/name: a copy of corpus `base` (md-119k: the first md-history files up to 119k records)."""
    root = BASE / name
    if root.is_dir():
        return root
    BASE.mkdir(parents=True, exist_ok=True)
    tmp = BASE / f".{name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    if base == "md-119k":
        corpora.subset(corpora.unpack("md-history"), files_for_records(TARGET_119K), tmp)
    else:
        shutil.copytree(corpora.unpack(base), tmp)
    tmp.rename(root)
    return root


def link_tree(src: Path, dest: Path) -> Path:
    """dest: the Markdown tree of src as hard links (never .folio/: an index is never shared)."""
    shutil.rmtree(dest, ignore_errors=True)
    for dirpath, dirs, files in os.walk(src):
        dirs[:] = [d for d in dirs if d != ".folio"]
        rel = Path(dirpath).relative_to(src)
        (dest / rel).mkdir(parents=True, exist_ok=True)
        for f in files:
            os.link(Path(dirpath) / f, dest / rel / f)
    return dest


def meta(root: Path) -> dict:
    with sqlite3.connect(root / ".folio" / "index.db") as c:
        return dict(c.execute("SELECT key, value FROM meta").fetchall())


def matrix_path(root: Path, m: dict) -> Path:
    gen = int(m.get("gen") or 0)
    return root / ".folio" / ("vectors.f32" if gen == 0 else f"vectors.{gen}.f32")


def dir_size(d: Path) -> int:
    return sum(f.stat().st_size for f in d.rglob("*") if f.is_file())


# --------------------------------------------------------------------------- figures


def parse_floor(root: Path) -> list[tuple[str, str]]:
    from folio import blocks, sections

    files = corpora.markdown_files(root)
    texts = [sections.decode(p.read_bytes())[0] for p in files]
    nbytes = sum(len(t.encode("utf-8")) for t in texts)
    md = blocks._parser()
    t = time.process_time()
    heads = sum(1 for x in texts for tok in md.parse(x) if tok.type == "heading_open")
    floor = time.process_time() - t
    t = time.process_time()
    recs = sum(len(sections.parse_document(x, 8000).records) for x in texts)
    ours = time.process_time() - t
    return [("parse floor (markdown-it block parse, CPU)",
             f"{nbytes / 1e6 / floor:.1f} MB/s, {heads / floor:,.0f} headings/s ({nbytes / 1e6:.1f} MB, {heads:,} "
             f"headings in {floor:.2f} s)"),
            ("folio sectioning (decode+frontmatter+split+divide, CPU)",
             f"{recs / ours:,.0f} records/s ({recs:,} records in {ours:.2f} s)")]


def index_once(root: Path, srv: common.Server, extra: list[str] = ()) -> dict:
    c0 = common.server_cpu(srv)
    m = common.folio(["index", "--endpoint", srv.url, "--json", *extra], root, ENV)
    server = common.server_cpu(srv) - c0
    rep = json.loads(m.stdout)
    return {"wall": m.wall, "cpu": m.cpu, "rss": m.rss, "server_cpu": server, "sections": rep["sections"],
            "embedded": rep["embedded"], "files": rep["files"], "stages": m.stages,
            "date": time.strftime("%Y-%m-%d %H:%M"), "commit": common.commit(), "load": common.load()}


def index_rows(label: str, runs: list[dict], root: Path) -> list[tuple[str, str]]:
    r = runs[0]
    walls = [x["wall"] for x in runs]
    cpus = [x["cpu"] for x in runs]
    srv = [x["server_cpu"] for x in runs]
    secs = r["sections"]
    med_cpu = statistics.median(cpus)
    stages = {k: statistics.median(x["stages"].get(k, 0.0) for x in runs) for k in r["stages"]}
    top = ", ".join(f"{k} {v:.2f}" for k, v in sorted(stages.items(), key=lambda kv: -kv[1])[:7])
    rows = [
        (f"{label}: wall", spread(walls, "s", 1, 2) + f"; {secs / statistics.median(walls):,.0f} sections/s"),
        (f"{label}: folio CPU (user+sys)", spread(cpus, "s", 1, 2) + f"; **{secs / med_cpu:,.0f} sections per folio "
                                                                       f"CPU second**"),
        (f"{label}: server CPU", spread(srv, "s", 1, 2) + f"; {secs / max(statistics.median(srv), 1e-9):,.0f} "
                                                          f"sections per server CPU second"),
        (f"{label}: folio stages (s, wall)", top),
        (f"{label}: peak RSS", mib(max(x["rss"] for x in runs))),
    ]
    if "date" in r and r.get("cached"):
        rows = [(k, v + f" [measured {r['date']}, commit {r['commit']}, {r['load']}]") for k, v in rows]
    return rows


def main_index(name: str, cached: bool, root: Path, srv: common.Server, repeat: int,
               reindex: bool) -> list[tuple[str, str]]:
    cache = BASE / f"{name}.index.json"
    if cached:
        if reindex or not (root / ".folio").is_dir() or not cache.exists():
            log(f"  initial index of {name} (long; reused by later runs) ...")
            r = index_once(root, srv, ["--rebuild"])
            cache.write_text(json.dumps(r))
        else:
            r = dict(json.loads(cache.read_text()), cached=True)
            log(f"  reusing the index of {name} built {r['date']}; pointing it at {srv.url}")
        common.folio(["index", "--endpoint", srv.url], root, ENV)  # same space, new port: every vector kept
        runs = [r]
    else:
        runs = [index_once(root, srv, ["--rebuild"]) for _ in range(repeat)]
    m = meta(root)
    size = dir_size(root / ".folio")
    rows = [("corpus", f"{runs[0]['files']:,} files, {runs[0]['sections']:,} records, budget {m.get('budget')} "
                       f"chars, dim {m.get('dim')}")]
    rows += index_rows(f"index (fake server, dim {m.get('dim')})", runs, root)
    rows.append((".folio/ size", f"{mib(size)} (matrix {mib(matrix_path(root, m).stat().st_size)})"))
    return rows


def zero_cost(name: str, cached: bool, root: Path, dim: int, repeat: int) -> list[tuple[str, str]]:
    zc = link_tree(root, BASE / f"{name}-zc")
    srv = common.fake_server(dim, cheap=True)
    try:
        runs = [index_once(zc, srv, ["--rebuild"]) for _ in range(1 if cached else repeat)]
    finally:
        srv.stop()
        shutil.rmtree(zc, ignore_errors=True)
    return index_rows("zero-cost index (--cheap server)", runs, zc)


def jobs_scaling(root: Path, dim: int, delay_ms: float = 20.0) -> list[tuple[str, str]]:
    zc = link_tree(root, BASE / "jobs-zc")
    srv = common.fake_server(dim, delay_ms=delay_ms, cheap=True)
    out = []
    try:
        for j in (1, 2, 4, 8):
            r = index_once(zc, srv, ["--rebuild", "--jobs", str(j)])
            out.append(f"--jobs {j}: {r['wall']:.2f} s, {r['embedded'] / r['wall']:,.0f} sections/s")
    finally:
        srv.stop()
        shutil.rmtree(zc, ignore_errors=True)
    return [(f"--jobs scaling ({delay_ms:.0f} ms added per request, --cheap, base64)", "; ".join(out))]


def reindex_rows(root: Path, repeat: int) -> list[tuple[str, str]]:
    rows = []
    runs = [common.folio(["index"], root, ENV) for _ in range(repeat)]
    imp = subprocess.run([sys.executable, "-X", "importtime", "-m", "folio", "index"], cwd=root, env=ENV,
                         capture_output=True, text=True)
    heavy = [mod for mod in ("numpy", "httpx", "markdown_it", "yaml") if f" {mod}\n" in imp.stderr]
    stages = {k: statistics.median(r.stages.get(k, 0.0) for r in runs) for k in runs[0].stages}
    rows.append(("no-op re-index: wall", spread([r.wall for r in runs])))
    rows.append(("no-op re-index: CPU", spread([r.cpu for r in runs])))
    rows.append(("no-op re-index: stages (ms)", ", ".join(f"{k} {ms(v)}" for k, v in stages.items())
                 + f"; imports numpy/httpx/markdown-it/yaml: {', '.join(heavy) or 'none'}"))
    paths = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.md") if ".folio" not in p.parts)
    victim = root / paths[len(paths) // 2]
    original = victim.read_bytes()
    st = victim.stat()
    one = []
    try:
        for i in range(repeat):
            victim.write_bytes(original + f"\n\nperf edit {i} {time.time_ns()}\n".encode())
            one.append(common.folio(["index"], root, ENV))
    finally:
        victim.write_bytes(original)
        os.utime(victim, ns=(st.st_atime_ns, st.st_mtime_ns))
        common.folio(["index"], root, ENV)
    rows.append(("one changed file: wall", spread([r.wall for r in one]) + f" ({paths[len(paths) // 2]})"))
    rows.append(("one changed file: CPU", spread([r.cpu for r in one])))
    moved = victim.with_name(victim.stem + "-renamed.md")
    ren = []
    try:
        for _ in range(max(1, repeat // 2)):
            victim.rename(moved)
            ren.append(common.folio(["index"], root, ENV))
            moved.rename(victim)
            ren.append(common.folio(["index"], root, ENV))
    finally:
        if moved.exists():
            moved.rename(victim)
            common.folio(["index"], root, ENV)
    rows.append(("one renamed file: wall", spread([r.wall for r in ren])))
    return rows


def query_texts(root: Path, n: int) -> list[str]:
    with sqlite3.connect(root / ".folio" / "index.db") as c:
        heads = [h for (h,) in c.execute("SELECT DISTINCT heading FROM records WHERE length(heading) BETWEEN 8 AND "
                                         "80 ORDER BY slot")]
    heads = [h.strip("#*`_ ") for h in heads if any(ch.isalpha() for ch in h)]
    heads = list(dict.fromkeys(h for h in heads if h))
    if len(heads) <= n:
        return heads
    step = len(heads) / n
    return [heads[int(i * step)] for i in range(n)]


def commonest_pair(root: Path) -> tuple[str, str] | None:
    with sqlite3.connect(root / ".folio" / "index.db") as c:
        rows = c.execute("SELECT frontmatter FROM files").fetchall()
    count: collections.Counter = collections.Counter()
    for (fm,) in rows:
        for k, v in json.loads(fm or "{}").items():
            if isinstance(v, str) and v and "|" not in v and "=" not in k and len(v) < 40:
                count[(k, v)] += 1
    if not count:
        return None
    (k, v), n = count.most_common(1)[0]
    return (k, v) if n < len(rows) else (count.most_common(2)[-1][0] if len(count) > 1 else (k, v))


def query_rows(root: Path, nq: int, repeat: int) -> list[tuple[str, str]]:
    m = meta(root)
    mpath = matrix_path(root, m)
    bare = [sys.executable, str(common.REPO / "bench" / "baseline_query.py"), str(mpath), m["rows"], m["dim"],
            m["endpoint"], m["model"]]
    texts = query_texts(root, nq)
    for t in texts[:3]:  # warm the page cache and both code paths
        common.folio(["query", t], root, ENV)
        common.measure([*bare, t], root, ENV)
    fol, base = [], []
    for t in texts:
        fol.append(common.folio(["query", t], root, ENV))
        base.append(common.measure([*bare, t], root, ENV))
    cpu_env = dict(ENV, FOLIO_TIMINGS="cpu")
    fol_cpu, base_cpu = [], []
    for t in texts[::3]:
        fol_cpu.append(common.folio(["query", t], root, cpu_env))
        base_cpu.append(common.measure([*bare, t], root, cpu_env))
    fw = [r.wall for r in fol]
    bw = [r.wall for r in base]
    ratio = statistics.median(fw) / statistics.median(bw)
    pair = statistics.median(f / b for f, b in zip(fw, bw, strict=True))
    fc = [r.cpu for r in fol]
    bc = [r.cpu for r in base]

    def stage_medians(runs, cpu=False):
        out = {}
        for k in STAGES:
            if k == "startup":
                out[k] = statistics.median((r.cpu if cpu else r.wall) - sum(r.stages.values()) for r in runs)
            elif k == "imports":
                out[k] = statistics.median(r.stages.get("imports", 0) + r.stages.get("cli", 0) for r in runs)
            else:
                out[k] = statistics.median(r.stages.get(k, 0.0) for r in runs)
        return out

    def split(f_runs, b_runs, cpu=False):
        fs, bs = stage_medians(f_runs, cpu), stage_medians(b_runs, cpu)
        return fs, bs, ", ".join(f"{k} {(fs[k] - bs[k]) * 1000:+.1f}" for k in STAGES)

    fs, bs, diff = split(fol, base)
    fsc, bsc, diffc = split(fol_cpu, base_cpu, cpu=True)
    matrix_bytes = mpath.stat().st_size
    rss = max(r.rss for r in fol)
    rows = [
        ("query: folio, whole process", spread(fw) + f", worst {max(fw) * 1000:.1f} ms, p90 "
                                                     f"{sorted(fw)[int(len(fw) * 0.9)] * 1000:.1f} ms"),
        ("query: bare baseline, whole process", spread(bw) + f", worst {max(bw) * 1000:.1f} ms"),
        ("query: ratio folio / bare (wall)", f"**{ratio:.2f}x** (medians); {pair:.2f}x median of per-query ratios"),
        ("query: CPU folio / bare", f"{spread(fc)} / {spread(bc)}: **{statistics.median(fc) / statistics.median(bc):.2f}x**"),
        ("query: folio stages (ms wall, medians)", ", ".join(f"{k} {ms(v)}" for k, v in fs.items())),
        ("query: bare stages (ms wall, medians)", ", ".join(f"{k} {ms(bs[k])}" for k in ("startup", "imports", "request",
                                                                                      "scan"))),
        ("query: folio minus bare by stage (ms wall)",
         diff + f"; total {(statistics.median(fw) - statistics.median(bw)) * 1000:+.1f}"),
        ("query: folio minus bare by stage (ms CPU)",
         diffc + f"; total {(statistics.median(r.cpu for r in fol_cpu) - statistics.median(r.cpu for r in base_cpu)) * 1000:+.1f}"
         f" (n={len(fol_cpu)})"),
        ("query: peak RSS", f"{mib(rss)}; {mib(rss - matrix_bytes)} excluding the mapped matrix ({mib(matrix_bytes)}); "
                            f"bare {mib(max(r.rss for r in base))}"),
    ]
    few = texts[: max(20, nq // 5)]
    pair_kv = commonest_pair(root)
    if pair_kv:
        where = f"{pair_kv[0]}={pair_kv[1]}"
        first = common.folio(["query", few[0], "--where", where], root, ENV, check=False)
        if first.rc == 0:
            filt = [common.folio(["query", t, "--where", where], root, ENV) for t in few]
            rows.append((f"filtered query (--where '{where}')", spread([r.wall for r in filt])
                         + f", worst {max(r.wall for r in filt) * 1000:.1f} ms"))
        else:
            rows.append(("filtered query", f"n/a at this commit: {first.stderr.strip().splitlines()[-1][:120]}"))
    else:
        rows.append(("filtered query", "n/a: no frontmatter in this corpus"))
    lex = [common.folio(["query", t, "--lexical"], root, ENV) for t in few]
    rows.append(("lexical query (--lexical)", spread([r.wall for r in lex]) + f", worst "
                                                                             f"{max(r.wall for r in lex) * 1000:.1f} ms"
                 + f"; CPU {spread([r.cpu for r in lex])}"))
    hyb = [common.folio(["query", t, "--mode", "hybrid"], root, ENV, check=False) for t in few]
    if all(r.rc == 0 for r in hyb):
        rows.append(("hybrid query (--mode hybrid)", spread([r.wall for r in hyb]) + f", worst "
                     f"{max(r.wall for r in hyb) * 1000:.1f} ms; CPU {spread([r.cpu for r in hyb])}"))
    stat = [common.folio(["status"], root, ENV) for _ in range(repeat)]
    rows.append(("status", spread([r.wall for r in stat])))
    return rows


# --------------------------------------------------------------------------- driver


def run_corpus(spec: str, a) -> list[tuple[str, str]]:
    base, dim, name = split_name(spec, a.dim)
    cached = base in CACHED
    root = prepare(base, name)
    log(f"== {name} ({root}), dim {dim}, {common.load()}")
    rows: list[tuple[str, str]] = []

    def add(new):
        for k, v in new:
            log(f"  {k:<48} {v}")
        rows.extend(new)

    if "floor" not in a.skip and base != "md-history":
        add(parse_floor(root))
    srv = common.fake_server(dim)
    try:
        add(main_index(name, cached, root, srv, a.repeat, a.reindex))
        if "reindex" not in a.skip:
            add(reindex_rows(root, a.repeat))
        if "query" not in a.skip:
            add(query_rows(root, a.queries, a.repeat))
    finally:
        srv.stop()
    if "zero-cost" not in a.skip:
        add(zero_cost(name, cached, root, dim, min(a.repeat, 3)))
    if "jobs" not in a.skip and name == a.jobs_corpus:
        add(jobs_scaling(root, dim))
    return rows


def main() -> None:
    global ENV
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpora", default=",".join(DEFAULT),
                    help=f"comma-separated, from {', '.join(ALL)}, each optionally @DIM (default {','.join(DEFAULT)})")
    ap.add_argument("--queries", type=int, default=120, help="distinct queries per corpus (default 120)")
    ap.add_argument("--repeat", type=int, default=5, help="whole-process repeats of the short figures")
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--reindex", action="store_true", help="rebuild the cached md-119k/md-history indexes")
    ap.add_argument("--skip", default="", help="comma-separated: floor, reindex, query, zero-cost, jobs, others")
    ap.add_argument("--jobs-corpus", default="keps")
    ap.add_argument("--no-record", action="store_true", help="print only; do not append to docs/benchmarks.md")
    a = ap.parse_args()
    a.skip = set(filter(None, a.skip.split(",")))
    ENV = env()
    (BASE / "xdg").mkdir(parents=True, exist_ok=True)
    for spec in filter(None, a.corpora.split(",")):
        _base, dim, _name = split_name(spec, a.dim)
        note = f"Under {common.load()} at the start"
        rows = run_corpus(spec, a)
        note += f", {common.load()} at the end (2 cores shared: wall times under load are upper bounds; CPU " \
                f"times barely move)."
        if not a.no_record:
            common.record(f"{spec.split('@')[0]}, fake server dim {dim}", rows, note=note)
    if "others" not in a.skip:
        run_others(a.no_record)


def run_others(no_record: bool) -> None:
    """The other owners' benchmark scripts, as their owners run them; the output of those that do
    not append to docs/benchmarks.md themselves is recorded here verbatim."""
    for mod, args, records in OTHERS:
        script = common.REPO / "bench" / f"{mod}.py"
        if not script.exists():
            continue
        log(f"== bench/{mod}.py ({common.load()})")
        extra = ["--no-record"] if records and no_record else []
        t = time.perf_counter()
        p = subprocess.run([sys.executable, str(script), *args, *extra], cwd=common.REPO, capture_output=True,
                           text=True)
        log(p.stdout.rstrip())
        if p.returncode:
            log(f"  bench/{mod}.py exited {p.returncode}: {p.stderr.strip()[-500:]}")
        if not records and not no_record and p.returncode == 0:
            common.record(f"bench/{mod}.py (run by bench/run_all.py)",
                          [("wall time of the script", f"{time.perf_counter() - t:.0f} s")],
                          extra=["```", *p.stdout.rstrip().splitlines(), "```"], note=f"At {common.load()}.")


if __name__ == "__main__":
    main()
