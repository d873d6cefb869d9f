"""rust-book through the real llama-server (default flags): the first table.

Index time and sections/s, the no-op re-index, query median and worst over the quality questions
and more, whole-process runs. Usage: python bench/rustbook_llama.py [--queries N] [--no-record]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import corpora  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-record", action="store_true")
    a = ap.parse_args()
    src = corpora.unpack("rust-book")
    root = common.fresh_copy(src, Path("/tmp/folio-bench/rust-book-llama"))
    srv = common.llama_server()
    try:
        env = {"XDG_CONFIG_HOME": "/tmp/folio-bench/xdg"}
        dt, out, err = common.run(["index", "--endpoint", srv.url, "--json"], root, env)
        rep = json.loads(out)
        sections = rep["sections"]
        noop = [common.run(["index"], root, env)[0] for _ in range(a.repeat)]
        questions = [q["q"] for q in yaml.safe_load((common.REPO / "tests/quality/rust_book.yaml").read_text())
                     ["questions"]]
        heads = ["ownership and borrowing rules", "how to read a file", "closures capturing the environment",
                 "writing tests", "smart pointers", "threads and message passing", "pattern syntax",
                 "unsafe code", "macros", "packages and crates"]
        qs = [common.run(["query", q], root, env)[0] for q in questions + heads]
        rows = [
            ("corpus", f"rust-book: {rep['files']} files, {sections} records (budget {rep['budget']} chars)"),
            ("server", "llama-server b11434, all-MiniLM-L6-v2 f16, default flags (-ub 512), 2 cores"),
            ("index, whole process", f"{dt:.2f} s ({rep['embedded'] / dt:.0f} sections/s embedded)"),
            ("no-op re-index", common.fmt(common.stats(noop))),
            ("query (whole process)", common.fmt(common.stats(qs), "ms", 1000) + f", worst {max(qs) * 1000:.0f} ms"),
        ]
        for k, v in rows:
            print(f"{k:<24} {v}")
        if not a.no_record:
            common.record("rust-book, real llama-server", rows)
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
