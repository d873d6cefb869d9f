"""The command line: parse, call one library function, render. The only place that writes to
stdout/stderr and the one place errors become exit codes (0 ok, 1 error, 2 usage, 130 interrupted).

Imports stay lean here: numpy, httpx and markdown-it load inside the commands that need them,
so `folio --help`, `folio config` and `folio skill` start fast.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import click

from folio import __version__, timing
from folio.errors import FolioError


def out(text: str) -> None:
    if text:
        try:
            click.echo(text)
        except BrokenPipeError:
            # The reader went away (`| head`): what is left has nowhere to go; finish quietly, exit 0.
            # (Caught here because click, left to itself, turns EPIPE into exit status 1.)
            _quiet_pipe()


def err(text: str) -> None:
    from folio.render import one_line

    click.echo(one_line(text), err=True)  # a path named in it cannot split the line or drive the terminal


def out_bytes(data: bytes) -> None:
    try:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    except BrokenPipeError:
        _quiet_pipe()


def _settings(root: Path | None, **flags):
    from folio import config

    return config.resolve(root, {k: v for k, v in flags.items() if v is not None})


def _corpus_root(required: bool = True) -> Path | None:
    from folio.config import find_root

    root = find_root()
    if root is None and required:
        raise FolioError("no folio index here or in any parent directory: run `folio index` at the corpus root")
    return root


def _corpus_of(given: str) -> Path:
    """The corpus a reference's file lies in: the nearest index at or above the file's directory (so
    `folio query --root src` output opens from where it was printed), else the one you stand in."""
    from folio.config import INDEX_DIR, find_root

    d = (Path.cwd() / given).parent
    while not d.is_dir() and d != d.parent:
        d = d.parent
    found = find_root(d)
    while found is not None and not (found / INDEX_DIR).is_dir() and found != found.parent:
        found = find_root(found.parent)  # a folio.yaml with no index yet: look further up
    if found is not None and (found / INDEX_DIR).is_dir():
        return found
    here = find_root()
    if here is None:
        raise FolioError(f"no folio index holds {given} (none in its directory or above it, nor above the "
                         f"current directory): give the path as `folio query` printed it, from the directory "
                         f"where it ran; a corpus never indexed needs `folio index` at its root first")
    return here


def _roots(given: tuple[Path, ...]) -> list[Path]:
    """--root DIR (repeatable) as given, else the corpus found by walking up from here."""
    if not given:
        return [_corpus_root()]
    from folio.config import INDEX_DIR

    roots = []
    for r in given:
        r = r.resolve()
        if not (r / INDEX_DIR / "index.db").is_file():
            raise FolioError(f"no folio index at {r}: run `folio index {r}` first (--root names a corpus root, "
                             f"the directory holding .folio/)")
        if r not in roots:
            roots.append(r)
    return roots


def _utf8(what: str, *values: str) -> None:
    """Arguments the shell passed as bytes that are not UTF-8 (Python keeps them as lone surrogates):
    one sentence, before they reach the index or the server, which take UTF-8 only."""
    for value in values:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:
            from folio.render import quote

            raise FolioError(f"{what} {quote(value)} holds bytes that are not UTF-8 (character {e.start + 1}); "
                             f"folio reads UTF-8 only: pass it in UTF-8 (check the terminal's or the script's "
                             f"encoding)", exit_code=2) from None


ROOT_OPTION = click.option(
    "--root", "roots", multiple=True, metavar="DIR",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Corpus root to search (repeat for several; default: the corpus you stand in).")


class _Progress:
    """`folio index` progress on stderr. On a terminal, click's progress bar: sections embedded of the
    sections this run embeds (done/total, percent, rate, ETA), or files read when nothing is embedded
    (a lexical-only run); a status line while folio asks the server for its first vectors. Off a
    terminal, a few plain lines on a long run. A run that takes long says how long when it starts."""

    PLAIN_AFTER, PLAIN_EVERY = 10.0, 30.0  # off a terminal: a line once a run has taken 10 s, then every 30 s
    ESTIMATE_ABOVE = 15.0  # a run expected to embed for longer than this says so once it has measured
    MEASURE = (2.0, 64)  # ... after at least 2 s and 64 sections of embedding

    def __init__(self, tty: bool):
        self.tty = tty
        self.bar = None
        self.kind = None
        self.status = False
        self.start = None  # (time, sections) at the first embedding answer: the rate counts from there
        self.said = False
        self.last = 0.0
        self.next_plain = time.monotonic() + self.PLAIN_AFTER

    def __call__(self, p) -> None:
        now = time.monotonic()
        if p.event == "calibrating":
            if self.tty:
                self._status(f"asking the embeddings server at {p.endpoint} for its first vectors and how many "
                             f"tokens it takes in one input ...")
            return
        if p.event == "embedded" and self.start is None:
            self.start = (now, p.embedded)
        rate = self._rate(p, now)
        total = max(p.to_embed(), p.embedded)
        if rate and not self.said and now - self.start[0] >= self.MEASURE[0] and \
                p.embedded - self.start[1] >= self.MEASURE[1]:
            self.said = True
            left = (total - p.embedded) / rate
            if left >= self.ESTIMATE_ABOVE:
                self._line(f"indexing: about {_duration(left)} to embed the {total - p.embedded:,} sections left"
                           f"{'' if p.files >= p.files_total else ' (estimated from the bytes still to read)'}, "
                           f"at the {rate:.0f} sections/s measured so far")
        if not self.tty:
            if now >= self.next_plain:
                self.next_plain = now + self.PLAIN_EVERY
                err(self._plain(p, total, rate))
            return
        if now - self.last < 0.1 and p.event not in ("lexical",):
            return
        self.last = now
        if self.start is not None and not p.lexical:
            self._bar("sections", total, "embedding sections")
            self.bar.update(p.embedded - self.bar.pos, f"{rate:.0f} sections/s" if rate else "")
        else:
            self._bar("lexical" if p.lexical else "files", p.files_total,
                      "reading files (lexical plane only)" if p.lexical else "reading files")
            self.bar.update(p.files - self.bar.pos, "")

    def _rate(self, p, now) -> float | None:
        if self.start is None or now - self.start[0] < 0.5 or p.embedded <= self.start[1]:
            return None
        return (p.embedded - self.start[1]) / (now - self.start[0])

    def _plain(self, p, total, rate) -> str:
        if p.lexical or self.start is None:
            return f"indexing: read {p.files:,} of {p.files_total:,} files"
        eta = f", about {_duration((total - p.embedded) / rate)} left" if rate else ""
        return f"indexing: embedded {p.embedded:,} of {total:,} sections ({rate or 0:.0f}/s{eta})"

    def _bar(self, kind: str, length: int, label: str) -> None:
        if self.kind == kind:
            self.bar.length = max(length, 1, self.bar.pos)
            return
        self._clear()
        self.kind = kind
        self.bar = click.progressbar(length=max(length, 1), label=label, file=sys.stderr, show_pos=True,
                                     show_percent=True, show_eta=True, item_show_func=lambda s: s, width=24)
        self.bar.__enter__()

    def _status(self, text: str) -> None:
        self._clear()
        click.echo(text, err=True, nl=False)
        self.status = True

    def say(self, text: str) -> None:
        """A message from the run (e.g. that it waits): on a line of its own, never inside the bar."""
        self._line(text)

    def _line(self, text: str) -> None:
        """A line of its own; on a terminal the bar redraws below it at the next update."""
        self._clear()
        err(text)

    def _clear(self) -> None:
        if self.tty and (self.status or self.bar is not None):
            # wipe the line; click's bar hid the cursor (its own finish would show it again)
            click.echo("\r\033[K" + ("\033[?25h" if self.bar is not None else ""), err=True, nl=False)
        self.status = False
        self.bar, self.kind = None, None

    def close(self, how: str) -> None:
        """done: wipe the bar (the run's report follows). failed / interrupted: leave the line where it
        stopped and end it, so what follows starts on a line of its own (click itself writes that
        newline for Ctrl-C and SIGTERM, which reach it as KeyboardInterrupt)."""
        if not self.tty or not (self.status or self.bar is not None):
            return
        if how == "done":
            self._clear()
            return
        click.echo("\033[?25h" if self.bar is not None else "", err=True, nl=how == "failed")
        self.status, self.bar = False, None


def _duration(seconds: float) -> str:
    from folio.doctor import duration  # one wording for `doctor`'s estimate and `index`'s

    return duration(seconds)


def _on_sigterm(_signum, _frame):
    raise KeyboardInterrupt  # `kill PID`: stop like Ctrl-C, so the run ends cleanly (exit 130)


CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(context_settings=CONTEXT)
@click.version_option(__version__, "-V", "--version", prog_name="folio")
def cli():
    """Find the right section of a Markdown corpus for a question, by meaning.

    folio splits every Markdown file by heading, embeds each section through an
    OpenAI-compatible /v1/embeddings endpoint, and answers with references
    (path:start-end and the heading trail), never bodies. With no server it ranks
    lexically (BM25F).
    """


@cli.command()
@click.argument("root", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option("--endpoint", help="Embeddings endpoint URL (beats FOLIO_ENDPOINT, folio.yaml, user config).")
@click.option("--model", help="Model name sent to the endpoint.")
@click.option("--max-chars", type=int, help="Character budget per record (default 8000; recorded in the index).")
@click.option("--rebuild", is_flag=True, help="Discard the index and build it anew.")
@click.option("--jobs", type=int, help="Concurrent embedding requests (default 1).")
@click.option("--no-wait", is_flag=True, help="Exit at once if another folio is writing this index.")
@click.option("--json", "as_json", is_flag=True, help="Print the run report as JSON.")
def index(root, endpoint, model, max_chars, rebuild, jobs, no_wait, as_json):
    """Index every Markdown file under ROOT (default: the corpus you stand in, else here)."""
    timing.lap("cli")
    from folio.config import find_root

    if root is None:
        root = find_root() or Path.cwd()
    else:
        if not root.is_dir():
            raise FolioError(f"{root} is not a directory", exit_code=2)
        root = root.resolve()
    settings = _settings(root, endpoint=endpoint, model=model, max_chars=max_chars, jobs=jobs)
    timing.lap("config")
    # The tree is listed in a child from here on, while this process imports the indexer, takes the
    # lock, opens the store and reads its stamps: a no-op re-index costs about the longer of the two.
    from folio.readahead import WalkAhead, take_early

    ahead = take_early(root, settings["extensions"], settings["exclude"])  # started before click (folio.entry)
    if ahead is None:
        ahead = WalkAhead(root, settings["extensions"], settings["exclude"])
    import signal

    from folio import indexer, render

    signal.signal(signal.SIGTERM, _on_sigterm)
    view = _Progress(sys.stderr.isatty())
    try:
        rep = indexer.run(root, settings, rebuild=rebuild, wait=not no_wait, on_wait=view.say, progress=view,
                          budget_flag=max_chars, ahead=ahead)
    except KeyboardInterrupt:
        view.close("interrupted")
        raise
    except BaseException:
        view.close("failed")
        raise
    finally:
        ahead.close()
    view.close("done")
    for w in rep.warnings:
        err(f"warning: {w}")
    for n in rep.notices:
        err(n)
    out(render.index_json(rep) if as_json else render.index_text(rep))
    timing.lap("render")
    if timing.ON:
        err(timing.line())
    if rep.error:
        raise FolioError(rep.error)


@cli.command()
@click.argument("text")
@click.option("--where", "where", multiple=True, metavar="PRED",
              help="Frontmatter filter: key=value, key, !key, key!=value; '|' ORs whole predicates. Repeat to AND.")
@click.option("--exclude-pointed-by", multiple=True, metavar="KEY",
              help="Drop records whose identity appears in any record's KEY (e.g. supersedes).")
@click.option("--identity", default="id", show_default=True, metavar="KEY",
              help="Frontmatter key holding a record's identity (@path: its file path).")
@click.option("-l", "--limit", default=5, show_default=True, type=click.IntRange(1, 1000), help="Rows to return.")
@click.option("--paths-only", is_flag=True, help="Print only path:start-end, one per line (unusual paths quoted, "
                                                  "as git does).")
@click.option("-0", "--null", is_flag=True, help="Like --paths-only, each exact path:start-end ended by NUL, not quoted "
                                                  "(for xargs -0).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (the agent contract).")
@click.option("--no-refresh", is_flag=True, help="Do not re-index changed files; mark their rows (stale).")
@click.option("--mode", type=click.Choice(["semantic", "lexical", "hybrid"]),
              help="How to rank: semantic (default), lexical (BM25F only) or hybrid (both rankings fused). "
                   "Beats FOLIO_MODE and `mode` in folio.yaml / the user config.")
@click.option("--lexical", is_flag=True, help="Shorthand for --mode lexical.")
@click.option("--band", is_flag=True, help="Print the confidence band on stderr (silent when grounded).")
@ROOT_OPTION
def query(text, where, exclude_pointed_by, identity, limit, paths_only, null, as_json, no_refresh, mode, lexical,
          band, roots):
    """Rank the sections that answer TEXT (touching sections that score alike come back as one row)."""
    timing.lap("cli")
    from folio import search

    if timing.ON:  # charge the lazy imports to one stage, as the bare baseline script does
        import numpy  # noqa: F401

        from folio import embed, store  # noqa: F401 - embed imports httpx
    timing.lap("imports")
    _check_query_args(text, where, exclude_pointed_by, identity, lexical=lexical, mode=mode, null=null,
                      as_json=as_json)
    roots = _roots(roots)
    settings = _settings(roots[0], mode="lexical" if lexical else mode)
    timing.lap("config")
    req = search.Request(text, limit, tuple(where), tuple(exclude_pointed_by), identity, not no_refresh,
                         settings["mode"], want_confidence=as_json or band)
    _print_answer(search.run(roots, req, settings), req, "json" if as_json else "null" if null else
                  "paths" if paths_only else "text", band)


def _check_query_args(text, where, exclude_pointed_by, identity, *, lexical, mode, null, as_json) -> None:
    """Refuse, before any work, what `folio query` cannot take (usage errors exit 2)."""
    if lexical and mode not in (None, "lexical"):
        raise click.UsageError(f"--lexical means --mode lexical; it cannot be combined with --mode {mode}")
    _utf8("the query", text)
    _utf8("--where", *where)
    _utf8("--exclude-pointed-by", *exclude_pointed_by)
    _utf8("--identity", identity)
    if null and as_json:
        raise click.UsageError("-0/--null prints NUL-ended paths; --json prints one object: choose one")


def _print_answer(answer, req, form: str, band: bool) -> None:
    """A query's rows on stdout in `form` (text, paths, null or json); on stderr, before them, what
    is said beside them, and after them the band (--band)."""
    from folio import render

    for n in render.query_notes(answer, req.exclude_pointed_by, req.identity):
        err(n)  # the dropped count always, even when 0 and even with --json (where it is also `dropped`)
    if form == "json":
        out(render.query_json(answer))
        return
    if not answer.hits:
        err("no section matched")
    if form in ("paths", "null"):
        for h in answer.hits:
            if h.freshness != "current":
                err(f"warning: {render.ref(h)} is {h.freshness}")
    if form == "null":
        out_bytes(os.fsencode(render.paths_only(answer, null=True)))
    else:
        out(render.paths_only(answer) if form == "paths" else render.query_text(answer))
    line = render.band_text(answer.confidence) if band and answer.confidence else None
    if line:
        err(line)
    timing.lap("render")
    if timing.ON:
        err(timing.line())


@cli.command()
@click.argument("spec", metavar="PATH:START-END")
@click.option("--json", "as_json", is_flag=True, help="Print {loc, sha, freshness, text} as one JSON object.")
def show(spec, as_json):
    """Print lines START-END of PATH read live, then a citation: path, the sha at indexing, freshness.

    PATH is relative to the current directory, as `folio query` prints it; `PATH:L12-L40` works too.
    """
    from folio import render
    from folio import show as showmod

    _utf8("the reference", spec)
    root = _corpus_of(showmod.parse_spec(spec)[0])
    shown = showmod.show(root, spec)
    out(render.show_json(shown) if as_json else render.show_text(shown))
    if shown.freshness == "stale":
        err(f"note: {render.quote(render.shown_path(root, shown.path))} changed since it was indexed: these lines may have "
            f"moved; `folio query` again gives a current reference")
    if shown.end < shown.asked_end:
        err(f"note: {render.quote(render.shown_path(root, shown.path))} has {shown.end} lines now; showed "
            f"{shown.start}-{shown.end}")
    if shown.freshness == "missing":
        raise FolioError(f"{render.quote(render.shown_path(root, shown.path))} no longer exists (it was indexed with sha "
                         f"{shown.sha}): `folio index` drops it, `folio query` finds where it went")


@cli.command()
@click.option("--truncated", is_flag=True, help="List every record whose over-long line was cut.")
@click.option("--key", metavar="KEY", help="List every value of frontmatter KEY with how many documents hold it.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@ROOT_OPTION
def status(truncated, key, as_json, roots):
    """What the index holds: files, sections, model, size, frontmatter keys, changes since indexing."""
    from folio import render
    from folio import status as statusmod

    roots = _roots(roots)
    if truncated:
        cut = [(root, statusmod.truncated(root)) for root in roots]
        out(render.truncated_json(cut) if as_json else render.truncated_text(cut))
        return
    infos = [statusmod.gather(root, _settings(root), key=key) for root in roots]
    if key and not as_json:
        out("\n\n".join(render.key_values_text(info, key, len(infos) > 1) for info in infos))
        return
    if as_json:
        out(render.dumps(infos[0] if len(infos) == 1 else {"roots": infos}))
    else:
        out("\n\n".join(render.status_text(info) for info in infos))


@cli.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_context
def config(ctx, as_json):
    """Show every setting with where it came from (flag, env, folio.yaml, user config, default)."""
    if ctx.invoked_subcommand is not None:
        return
    from folio import config as cfg
    from folio import render, space, store

    root = _corpus_root(required=False)
    s = _settings(root)
    meta = store.read_meta(root)
    model, ask = space.preset_model(s, meta)
    info = {"values": {**{k: (v.value, v.source) for k, v in s.values.items()},
                       **space.role_settings(s, model, asked_server=ask)},
            "user_file": str(s.user_file), "project_file": str(s.project_file) if s.project_file else None,
            "user_file_exists": s.user_file.is_file(),
            "project_file_exists": bool(s.project_file and s.project_file.is_file()),
            "root": str(root) if root else None,
            # the budget a `folio index` here divides by, and why (the index may keep its own)
            "budget": space.budget(s, meta).describe()}
    if as_json:
        data = {k: {"value": cfg.shown(k, v) if v else v, "source": src}
                for k, (v, src) in info["values"].items()}
        out(render.dumps({"root": info["root"], "user_file": info["user_file"],
                          "user_file_exists": info["user_file_exists"], "project_file": info["project_file"],
                          "project_file_exists": info["project_file_exists"], "settings": data,
                          "budget": info["budget"]}))
    else:
        out(render.config_text(info))


@config.command("set")
@click.option("--project", is_flag=True, help="Write folio.yaml at the corpus root instead of the user config.")
@click.argument("key")
@click.argument("value")
def config_set(project, key, value):
    """Set KEY to VALUE in the user config (or folio.yaml with --project)."""
    from folio import config as cfg

    root = _corpus_root(required=False) or Path.cwd()
    path = cfg.set_value(key, value, project=project, root=root)
    err(f"{key} = {cfg.shown(key, value)} written to {path}")


@cli.command()
@click.option("--endpoint", help="Probe this endpoint URL instead of the configured one (this run only).")
@click.option("--model", help="Model name sent to the endpoint (this run only).")
@click.option("--max-chars", type=click.IntRange(200), help="Character budget per record for the long-input probe.")
@click.option("--json", "as_json", is_flag=True, help="Print every probe's verdict and measurements as JSON.")
def doctor(endpoint, model, max_chars, as_json):
    """Probe the embeddings endpoint: batch, context, pooling, truncation. Exit 1 when a probe fails.

    Reads this corpus's longest section (the corpus found by walking up to .folio/ or folio.yaml,
    else the Markdown under the current directory); never writes the index.
    """
    from folio import doctor as doc
    from folio import render

    rep = doc.run(Path.cwd(), endpoint=endpoint, model=model, max_chars=max_chars)
    out(render.doctor_json(rep) if as_json else render.doctor_text(rep))
    return 0 if rep.ok else 1


@cli.command()
@click.option("--backend", type=click.Choice(["llama.cpp", "tei"]), default="llama.cpp", show_default=True,
              help="Server to run: llama.cpp's llama-server, or text-embeddings-inference.")
@click.option("--systemd", "kind", flag_value="systemd", help="A systemd user unit (default on Linux).")
@click.option("--launchd", "kind", flag_value="launchd", help="A launchd agent plist (default on macOS).")
@click.option("--model", metavar="PATH", help="The model: a GGUF file (llama.cpp) or a model directory (tei).")
@click.option("--ctx", type=click.IntRange(1), help="llama-server -c (default: the GGUF's context length, else 512).")
@click.option("--batch", type=click.IntRange(1), help="llama-server -b and -ub (default: the context).")
@click.option("--pooling", type=click.Choice(["mean", "cls", "last", "rank"]),
              help="Pass --pooling to the server (only when named: the model's own pooling is usually right).")
@click.option("--binary", metavar="PATH", help="The server binary (default: found on PATH).")
@click.option("--endpoint", help="Serve this endpoint's host and port instead of the configured one.")
def unit(backend, kind, model, ctx, batch, pooling, binary, endpoint):
    """Print a service file that serves this corpus's endpoint (never installs it)."""
    from folio import unit as unitmod

    root = _corpus_root(required=False)
    settings = _settings(root, endpoint=endpoint)
    u = unitmod.build(settings["endpoint"], backend=backend, kind=kind, model=model, context=ctx, batch=batch,
                      pooling=pooling, binary=binary, corpus=str(root) if root else None)
    for w in u.warnings:
        err(f"warning: {w}")
    out(u.text)


@cli.command()
@ROOT_OPTION
def mcp(roots):
    """Serve query, show, status and index as MCP tools over stdio (for agent hosts).

    Register it with your agent host, e.g. `claude mcp add folio -- folio mcp`. Keeps each index
    open and the embeddings connection alive between questions; stdout carries only the protocol.
    """
    from importlib.util import find_spec

    roots = _roots(roots)
    if find_spec("mcp") is None:
        raise FolioError("`folio mcp` needs the MCP SDK: run `pip install 'mcp>=2.3'` in folio's environment "
                         "(the README's set-up command installs it)")
    from folio import mcp as mcpmod

    mcpmod.serve(roots)


@cli.command()
def skill():
    """Print the bundled SKILL.md: how an agent should use folio."""
    from importlib import resources

    out(resources.files("folio").joinpath("SKILL.md").read_text(encoding="utf-8").rstrip("\n"))


def main() -> None:
    """Entry point: run click without its own error handling, so errors render here, once."""
    try:
        rv = cli.main(standalone_mode=False, prog_name="folio")
        code = rv if isinstance(rv, int) else 0
    except FolioError as e:
        _flush_quietly()
        err(f"folio: {e}")
        code = e.exit_code
    except click.UsageError as e:
        e.show()
        code = 2
    except click.exceptions.Exit as e:
        code = e.exit_code
    except click.Abort:
        err("folio: interrupted")
        code = 130
    except KeyboardInterrupt:
        err("folio: interrupted")
        code = 130
    except BrokenPipeError:
        _quiet_pipe()
        code = 0
    except click.ClickException as e:
        e.show()
        code = e.exit_code
    except Exception as e:
        from folio.errors import disk_full, full_sentence

        if disk_full(e):  # a query's refresh, or a write no command caught: the same sentence
            _flush_quietly()
            err(f"folio: {full_sentence(e, 'the index')}")
        elif _damaged(e):
            _flush_quietly()
            if isinstance(e, ValueError):  # JSON the store wrote, edited by hand or overwritten
                e = f"a frontmatter or heading trail stored in .folio/index.db is not valid JSON: {e}"
            err(f"folio: the index is damaged ({e}); run `folio index --rebuild` to build it anew")
        else:
            raise
        code = 1
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_pipe()
    sys.exit(code)


def _damaged(e: Exception) -> bool:
    """A SQLite error that means the file is corrupt, wherever the store met it (the store names the
    path where it can; this catches a bad page found in the middle of a read), or stored JSON that
    does not parse (folio only ever parses JSON it wrote itself, in index.db; the server's answers
    are read and judged in embed.py)."""
    import json
    import sqlite3

    if isinstance(e, json.JSONDecodeError):
        return True
    if isinstance(e, sqlite3.OperationalError):
        return "no such table" in str(e) or "no such column" in str(e)
    return isinstance(e, sqlite3.DatabaseError)


def _flush_quietly() -> None:
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_pipe()


def _quiet_pipe() -> None:
    # The reader went away (`folio query ... | head`): stop writing, exit quietly.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
