"""rust-book through the real llama-server: what dividing by the server's token counts costs, and
what one dense file changes (issue 15.5).

1. `folio index` of a fresh rust-book copy (whole process), against a bare script that embeds
   folio's final records once: the same texts (each record's reader text), the same server, the
   same batch size, one request after another. Target: folio <= 1.3x the bare embedding.
2. Records against heading sections, for rust-book alone and with one 7.8 kB file of hex lines
   added (dense for a WordPiece tokenizer): rust-book's own records must not change.

Usage: python bench/token_budget.py [--no-record] [-- llama-server args, e.g. -ub 128 -b 128]
       python bench/token_budget.py --fake   (tests/fakeserver.py, 512-token batch, 3 ms a request:
                                              checks the script, measures nothing about llama-server)
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import corpora  # noqa: E402

HEX = "# Dump\n\n" + "\n".join(" ".join(f"{(i * 37 + j * 11) % 256:02x}" for j in range(16))
                               for i in range(163)) + "\n"  # 7.8 kB of hex lines


def heading_sections(root: Path) -> int:
    from folio import sections

    n = 0
    for p in sorted(root.rglob("*.md")):
        if ".folio" not in p.parts:
            n += len(sections.split_sections(sections.decode(p.read_bytes())[0]))
    return n


def records(root: Path) -> list[tuple[str, int, int, int]]:
    db = sqlite3.connect(root / ".folio" / "index.db")
    try:
        return db.execute('SELECT f.path, r.start, r."end", r.truncated FROM records r JOIN files f '
                          'ON f.id = r.file_id ORDER BY f.path, r.start').fetchall()
    finally:
        db.close()


def bare_embed(root: Path, url: str, batch: int) -> tuple[float, int]:
    """Embed folio's final records once, as it sent them, batch by batch: (seconds, inputs)."""
    import httpx

    from folio.reader import reader_text

    texts = []
    lines: dict[str, list[str]] = {}
    for path, start, end, truncated in records(root):
        if path not in lines:
            lines[path] = (root / path).read_text(encoding="utf-8").replace("\r", "").split("\n")
        if truncated:
            continue  # a cut line: its cut is folio's; rust-book has none
        texts.append(reader_text("\n".join(lines[path][start - 1:end])))
    with httpx.Client(timeout=600) as client:
        t = time.perf_counter()
        for i in range(0, len(texts), batch):
            r = client.post(url, json={"model": "default", "input": texts[i:i + batch], "encoding_format": "base64"})
            r.raise_for_status()
        return time.perf_counter() - t, len(texts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-record", action="store_true")
    ap.add_argument("--batch", type=int, default=32, help="folio's batch_size (its default)")
    ap.add_argument("--fake", action="store_true", help="the fake server instead (a dry run of the script)")
    ap.add_argument("server_args", nargs="*")
    a = ap.parse_args()
    src = corpora.unpack("rust-book")
    plain = common.fresh_copy(src, Path("/tmp/folio-bench/rust-book-tokens"))
    dense = common.fresh_copy(src, Path("/tmp/folio-bench/rust-book-tokens-hex"))
    (dense / "hex.md").write_text(HEX, encoding="utf-8")
    env = {"XDG_CONFIG_HOME": "/tmp/folio-bench/xdg"}
    if a.fake:
        port = common.free_port()
        srv = common.Server([sys.executable, str(common.FAKESERVER), "--port", str(port), "--dim", "384",
                             "--max-tokens", "512", "--delay-ms", "3", *a.server_args], f"http://127.0.0.1:{port}")
    else:
        srv = common.llama_server(a.server_args)
    try:
        m = common.folio(["index", "--endpoint", srv.url, "--json"], plain, env)
        rep = json.loads(m.stdout)
        bare, inputs = bare_embed(plain, srv.url, a.batch)
        md = common.folio(["index", "--endpoint", srv.url, "--json"], dense, env)
        rep_d = json.loads(md.stdout)
    finally:
        srv.stop()
    rec_plain = records(plain)
    rec_dense = records(dense)
    book_dense = [r for r in rec_dense if r[0] != "hex.md"]
    same = book_dense == rec_plain
    sections = heading_sections(plain)
    ratio = m.wall / bare
    flags = " ".join(a.server_args) or "default flags (-ub 512)"
    name = ("tests/fakeserver.py (a dry run: --max-tokens 512 --delay-ms 3)" if a.fake else
            f"llama-server b11434, all-MiniLM-L6-v2 f16, {flags}")
    rows = [
        ("server", f"{name}; token limit learned: {rep['tokens']}"),
        ("rust-book", f"{rep['files']} files, {sections} heading sections -> {len(rec_plain)} records "
                      f"(budget {rep['budget']} chars)"),
        ("folio index, whole process", f"{m.wall:.1f} s ({m.cpu:.1f} s folio CPU)"),
        ("bare: folio's final records embedded once", f"{bare:.1f} s ({inputs} inputs, batches of {a.batch})"),
        ("ratio folio / bare", f"{ratio:.2f}x (target <= 1.3x)"),
        ("with a 7.8 kB hex file added", f"{len(book_dense)} rust-book records ({'identical' if same else 'CHANGED'}) "
                                          f"+ {len(rec_dense) - len(book_dense)} for hex.md; index {md.wall:.1f} s"),
        ("dead rows after the fresh builds", f"{rep['dead_rows']} and {rep_d['dead_rows']}"),
    ]
    for k, v in rows:
        print(f"{k:<44} {v}")
    if not a.no_record and not a.fake:
        common.record("token budget: rust-book through the real llama-server", rows, note=f"load: {common.load()}")
    if not same:
        sys.exit("rust-book's records changed when a dense file was added")


if __name__ == "__main__":
    main()
