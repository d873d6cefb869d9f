"""The command line: parse (click), call one library function, render through console.py (which
owns stdout/stderr and the exit codes). `folio index` with a plain argv skips this module and
click altogether (folio.entry, index_command.py).

Imports stay lean here: numpy, httpx and markdown-it load inside the commands that need them,
so `folio --help`, `folio config` and `folio skill` start fast.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from folio import __version__, console, timing, usage
from folio.console import err, out, out_bytes, stdout_is_terminal
from folio.errors import FolioError


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


def _index_around(root: Path) -> Path | None:
    """The index you stand in, where it encloses `root` (a nested index's): a reference printed here may
    be that index's, not `root`'s."""
    from folio.config import INDEX_DIR, find_root

    here = find_root()
    while here is not None and not (here / INDEX_DIR).is_dir() and here != here.parent:
        here = find_root(here.parent)
    return here if here is not None and (here / INDEX_DIR).is_dir() and here in root.parents else None


def _roots(given: tuple[Path, ...]) -> list[Path]:
    """--root DIR (repeatable) as given, else the corpus found by walking up from here."""
    if not given:
        return [_corpus_root()]
    from folio.config import INDEX_DIR

    roots = []
    for r in given:
        r = r.resolve()
        if not (r / INDEX_DIR / "index.db").is_file():
            from folio.config import enclosing_index

            above = enclosing_index(r)
            if above is not None:  # a directory inside a corpus: its root is meant, not a second index
                raise FolioError(f"no folio index at {r}: it lies inside the corpus at {above}, whose index "
                                 f"holds its files: give that root (--root {above})")
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
@click.option("--rebuild", is_flag=True, help="Discard the index and build it anew (with the endpoint and model it recorded, unless set).")
@click.option("--jobs", type=int, help="Concurrent embedding requests (default 1).")
@click.option("--no-wait", is_flag=True, help="Exit at once if another folio is writing this index.")
@click.option("--json", "as_json", is_flag=True, help="Print the run report as JSON.")
@click.option("--watch", is_flag=True, help="Then stay: index each burst of changes as it happens, one line "
                                            "each, until Ctrl-C.")
def index(root, endpoint, model, max_chars, rebuild, jobs, no_wait, as_json, watch):
    """Index every Markdown file under ROOT (default: the corpus you stand in, else here)."""
    from folio import index_command

    index_command.index(root, endpoint, model, max_chars, rebuild, jobs, no_wait, as_json, watch)


@cli.command()
@click.argument("text")
@click.option("--where", "where", multiple=True, metavar="PRED",
              help="Frontmatter filter: key=value, key~=value (one item of a comma-separated value), key, !key, "
                   "key!=value; '|' ORs whole predicates. Repeat to AND.")
@click.option("--exclude-pointed-by", multiple=True, metavar="KEY",
              help="Drop documents whose identity appears in any document's KEY (e.g. supersedes); the documents "
                   "dropped are counted on stderr.")
@click.option("--identity", default="id", show_default=True, metavar="KEY",
              help="Frontmatter key holding a document's identity (@path: its file path).")
@click.option("-l", "--limit", default=5, show_default=True, type=click.IntRange(1, 1000), help="Rows to return.")
@click.option("--paths-only", is_flag=True, help="Print only path:start-end, one per line (unusual paths quoted, "
                                                  "as git does).")
@click.option("-0", "--null", is_flag=True, help="Like --paths-only, each exact path:start-end ended by NUL, not quoted "
                                                  "(for xargs -0).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (the agent contract).")
@click.option("--no-refresh", is_flag=True, help="Do not re-index changed files; mark their rows (stale).")
@click.option("--mode", type=click.Choice(["semantic", "lexical", "hybrid"]),
              help="How to rank: hybrid (default: both rankings fused), semantic (by meaning only) or lexical "
                   "(BM25F only). "
                   "Beats FOLIO_MODE and `mode` in folio.yaml / the user config.")
@click.option("--lexical", is_flag=True, help="Shorthand for --mode lexical.")
@click.option("--words", multiple=True, metavar="WORDS",
              help='Words the answer likely holds (e.g. \'retry backoff "exponential delay"\'): ranked by the '
                   'words themselves and fused with the question (repeatable: all the words count).')
@click.option("--passage", "passages", multiple=True, metavar="TEXT",
              help="A few sentences written as the answering section would be: ranked by meaning and fused with "
                   "the question (repeatable). Both facets go in the question's one request to the server.")
@click.option("--band", is_flag=True, help="Print the confidence band on stderr (silent when grounded).")
@ROOT_OPTION
def query(text, where, exclude_pointed_by, identity, limit, paths_only, null, as_json, no_refresh, mode, lexical,
          words, passages, band, roots):
    """Rank the sections that answer TEXT (touching sections that score alike come back as one row)."""
    timing.lap("cli")
    from folio import search

    if timing.ON:  # charge the lazy imports to one stage, as the bare baseline script does
        import numpy  # noqa: F401

        from folio import embed, store  # noqa: F401 - embed imports httpx
    timing.lap("imports")
    _check_query_args(text, where, exclude_pointed_by, identity, lexical=lexical, mode=mode, null=null,
                      paths_only=paths_only, as_json=as_json)
    _utf8("--words", *words)
    # repeated, all count, as the MCP query tool takes a list (an empty one is refused below)
    words = None if not words else "" if any(not w.strip() for w in words) else " ".join(words)
    _utf8("--passage", *passages)
    from folio import facets

    why = facets.problem(text, words, passages, cli=True)
    if why:
        raise click.UsageError(why)
    roots = _roots(roots)
    settings = _settings(roots[0], mode="lexical" if lexical else mode)
    timing.lap("config")
    req = search.Request(text, limit, tuple(where), tuple(exclude_pointed_by), identity, not no_refresh,
                         settings["mode"], want_confidence=as_json or band, words=words, passages=tuple(passages))
    _print_answer(search.run(roots, req, settings), req, "json" if as_json else "null" if null else
                  "paths" if paths_only else "text", band)


def _check_query_args(text, where, exclude_pointed_by, identity, *, lexical, mode, null, paths_only,
                      as_json) -> None:
    """Refuse, before any work, what `folio query` cannot take (usage errors exit 2)."""
    if lexical and mode not in (None, "lexical"):
        raise click.UsageError(f"--lexical means --mode lexical; it cannot be combined with --mode {mode}")
    _utf8("the query", text)
    _utf8("--where", *where)
    _utf8("--exclude-pointed-by", *exclude_pointed_by)
    _utf8("--identity", identity)
    if (null or paths_only) and as_json:
        flag = "-0/--null prints NUL-ended paths" if null else "--paths-only prints one path:range a line"
        raise click.UsageError(f"{flag}; --json prints one object: choose one")
    _identity_alone(exclude_pointed_by)


def _identity_alone(exclude_pointed_by) -> None:
    """A note when --identity is given without --exclude-pointed-by, the only option that reads it."""
    from click.core import ParameterSource

    ctx = click.get_current_context(silent=True)
    if ctx is not None and not exclude_pointed_by and ctx.get_parameter_source("identity") == ParameterSource.COMMANDLINE:
        err("note: --identity names what --exclude-pointed-by's values point at; without --exclude-pointed-by it "
            "changes nothing")


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
    filtered_out = not answer.hits and bool(req.where or req.exclude_pointed_by)
    line = render.band_text(answer.confidence, filtered_out=filtered_out) if band and answer.confidence else None
    if line:
        err(line)
    timing.lap("render")
    if timing.ON:
        err(timing.line())


@cli.command()
@click.argument("spec", metavar="PATH[:START-END]")
@click.option("--where", "where", multiple=True, metavar="PRED",
              help="Frontmatter filter, as for query: key=value, key~=value, key, !key, key!=value. Repeat to AND.")
@click.option("--exclude-pointed-by", multiple=True, metavar="KEY",
              help="Drop documents whose identity appears in any document's KEY (e.g. supersedes).")
@click.option("--identity", default="id", show_default=True, metavar="KEY",
              help="Frontmatter key holding a document's identity (@path: its file path).")
@click.option("-l", "--limit", default=5, show_default=True, type=click.IntRange(1, 1000), help="Rows to return.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (a query's, with the source).")
@click.option("--no-refresh", is_flag=True, help="Do not re-index the source file when it changed (its stored vectors rank as they are).")
@ROOT_OPTION
def similar(spec, where, exclude_pointed_by, identity, limit, as_json, no_refresh, roots):
    """The sections nearest to PATH's sections (or to lines START-END of it) by the stored vectors.

    Near-duplicates come first, each with its cosine similarity (1.000: the same text); the source's
    own sections are left out. No request to the embeddings server when the source is indexed.
    `-` reads a text on stdin instead (a draft: its sections are embedded, so the server is needed).
    """
    from folio import render, search
    from folio import similar as simmod

    _utf8("the source", spec)
    _check_query_args("", where, exclude_pointed_by, identity, lexical=False, mode=None, null=False,
                      paths_only=False, as_json=as_json)
    if spec == "-":
        served = _roots(roots)
        from folio.sections import decode

        text, why = decode(sys.stdin.buffer.read())  # as a file's bytes are read: bad UTF-8 replaced, said
        if why:
            err(f"warning: the text on stdin: {why}")
        source = simmod.Source("-", text=text)
    else:
        given = simmod.parse(spec, Path.cwd())[0]
        served = _roots(roots) if roots else [_corpus_of(given)]
        source = simmod.source_of(served, spec)
    settings = _settings(served[0])
    req = search.Request(spec, limit, tuple(where), tuple(exclude_pointed_by), identity, not no_refresh, "semantic")
    with search.Session(served, settings) as session:
        sim = simmod.run(session, source, req)
    for n in render.query_notes(sim.answer, req.exclude_pointed_by, req.identity):
        err(n)
    if as_json:
        out(render.similar_json(sim))
        return
    if not sim.answer.hits:
        err("no section matched")
    out(render.similar_text(sim))


@cli.command()
@click.argument("spec", metavar="PATH:START-END")
@click.option("--sha", metavar="SHA", help="The query row's citation.sha: say what became of its lines since, and "
                                           "show its section where it is now.")
@click.option("--trail", metavar="TRAIL", help="With --sha: the row's trail (as --json gives it, or the line query "
                                               "prints), to find its section if the file changed.")
@click.option("--json", "as_json", is_flag=True, help="Print {loc, sha, freshness, text} as one JSON object.")
def show(spec, sha, trail, as_json):
    """Print lines START-END of PATH read live, then a citation: path, the sha at indexing, freshness.

    PATH is relative to the current directory, as `folio query` prints it; `PATH:L12-L40` works too.
    With --sha (the query row's citation.sha): if the file changed since that row, the lines shown are
    its section where it is now, or exit 1 when it cannot be found.
    """
    from folio import render
    from folio import show as showmod

    _utf8("the reference", spec)
    if trail is not None and sha is None:
        raise click.UsageError("--trail goes with --sha: give the query row's citation.sha too (--sha SHA)")
    said = None
    if sha is not None:
        _utf8("--trail", trail or "")
        said = showmod.Said(showmod.parse_sha(sha), None if trail is None else showmod.parse_trail(trail))
    root = _corpus_of(showmod.parse_spec(spec)[0])
    shown = showmod.show(root, spec, outer=_index_around(root), said=said)
    name = render.quote(render.shown_path(root, shown.path))
    since = shown.since_row
    notes = []
    vouched = since is not None and since["state"] in ("same", "in_place", "moved")  # the row's section, found now
    if shown.older_in is not None and not vouched:
        notes.append(f"the index at {shown.older_in} (where you stand) holds an older copy of "
                     f"{name}, so a reference a query there printed may "
                     f"name other lines now; `folio query` there again re-indexes it and gives a current reference, "
                     f"or `folio index` does")
    elif shown.freshness == "stale" and not vouched:
        notes.append(f"{name} changed since it was indexed: these lines "
                     f"may have moved; `folio query` again re-indexes it and gives a current reference (with the index "
                     f"writable, and the embeddings server up if the section's text changed), or `folio index` does")
    if since is not None and since["state"] in ("in_place", "moved"):
        notes.append(render.since_row_note(name, since, shown))
    if shown.end < shown.asked_end:
        notes.append(f"{name} {showmod.lines_now(shown.end)}; showed "
                     f"{shown.start}-{shown.end}")
    if as_json:  # the notes in the object too, as a query's `notices`: an agent reads stdout
        out(render.show_json(shown, notes))
    else:  # on a terminal a file's control characters are shown escaped; piped, its lines are exact
        out(render.show_text(shown, visible=stdout_is_terminal()), exact=True)
    for note in notes:
        err(f"note: {note}")
    if shown.freshness == "missing":
        raise FolioError(f"{name} no longer exists (it was indexed with sha "
                         f"{shown.sha}): `folio index` drops it, `folio query` finds where it went")
    if since is not None and since["state"] in ("not_found", "changed"):
        raise FolioError(showmod.since_sentence(name, since))


@cli.command()
@click.option("--truncated", is_flag=True, help="List every record whose over-long line was cut.")
@click.option("--key", metavar="KEY", help="List every value of frontmatter KEY with how many documents hold it.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@ROOT_OPTION
def status(truncated, key, as_json, roots):
    """What the index holds: files, sections, model, size, frontmatter keys, changes since indexing."""
    from folio import render
    from folio import status as statusmod

    if key is not None and not key.strip():
        raise click.UsageError("--key is empty: name a frontmatter key (`folio status` lists them), e.g. --key status")
    if key is not None and truncated:
        raise click.UsageError("--truncated lists cut records; --key lists a key's values: choose one")
    roots = _roots(roots)
    if truncated:
        cut, refused = statusmod.each(roots, lambda root: (root, statusmod.truncated(root)))
        if cut:
            out(render.truncated_json(cut) if as_json else render.truncated_text(cut))
        return _refused(refused)
    infos, refused = statusmod.each(roots, lambda root: statusmod.gather(root, _settings(root), key=key))
    if infos and key and not as_json:
        out("\n\n".join(render.key_values_text(info, key, len(roots) > 1) for info in infos))
    elif infos and as_json:
        out(render.dumps(render.status_json(infos, several=len(roots) > 1)))
    elif infos:
        out("\n\n".join(render.status_text(info) for info in infos))
    _refused(refused)


def _refused(refused: list[str]) -> None:
    """The corpora a command over several could not read, one sentence each, after what it printed of
    the others: the last one as the command's error (exit 1)."""
    for said in refused[:-1]:
        err(f"folio: {said}")
    if refused:
        raise FolioError(refused[-1])


@cli.command(name="ls")
@click.argument("given", metavar="[ROOT]...", nargs=-1, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--where", "where", multiple=True, metavar="PRED",
              help="Frontmatter filter, as for query: key=value, key~=value, key, !key, key!=value; '|' ORs whole "
                   "predicates. Repeat to AND.")
@click.option("--exclude-pointed-by", multiple=True, metavar="KEY",
              help="Drop documents whose identity appears in any document's KEY (e.g. supersedes).")
@click.option("--identity", default="id", show_default=True, metavar="KEY",
              help="Frontmatter key holding a document's identity (@path: its file path).")
@click.option("--key", "keys", multiple=True, metavar="KEY",
              help="Print KEY's value after each path (repeat for several); with --json, the frontmatter holds "
                   "only these keys.")
@click.option("-0", "--null", is_flag=True, help="Each exact path ended by NUL, not quoted (for xargs -0).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: each document's path, title and "
                                                       "frontmatter.")
@ROOT_OPTION
def ls(given, where, exclude_pointed_by, identity, keys, null, as_json, roots):
    """List the documents the filters keep, one path per line (every indexed document without filters).

    ROOT (or --root DIR, repeatable): the corpus roots to list (default: the corpus you stand in).
    Filters mean exactly what they mean for `folio query`; no embeddings server is needed.
    """
    from folio import ls as lsmod
    from folio import render

    _utf8("--where", *where)
    _utf8("--exclude-pointed-by", *exclude_pointed_by)
    _utf8("--identity", identity)
    _utf8("--key", *keys)
    _identity_alone(exclude_pointed_by)
    if null and (as_json or keys):
        raise click.UsageError(f"-0/--null prints NUL-ended paths only; {'--json' if as_json else '--key'} "
                               f"prints more: choose one")
    listed = _roots(tuple(given) + tuple(roots))
    listing = lsmod.run(listed, where, exclude_pointed_by, identity, _settings(listed[0]))
    notes = listing.notices + render.filter_notes(listing.hints, listing.dropped, exclude_pointed_by, identity)
    notes += render.key_notes(listing.documents, keys)
    for n in notes:
        err(n)
    if as_json:
        out(render.ls_json(listing.documents, listing.roots, notes, listing.dropped, keys))
        return
    if not listing.documents:
        err("no document matched")
    elif null:
        out_bytes(os.fsencode(render.ls_null(listing.documents)))
    else:
        out(render.ls_text(listing.documents, keys))


@cli.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_context
def config(ctx, as_json):
    """Show every setting with where it came from (flag, env, folio.yaml, user config, default)."""
    if ctx.invoked_subcommand is None:
        _config_show(as_json)


@config.command("show")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_context
def config_show(ctx, as_json):
    """Show every setting with where it came from (what `folio config` alone prints)."""
    _config_show(as_json or ctx.parent.params.get("as_json", False))


def _config_show(as_json: bool) -> None:
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
            "budget": space.budget(s, meta).describe(),
            # what a query embeds its question through: the index's own, whatever the settings name now
            "recorded": {"endpoint": meta.endpoint, "model": meta.model or ""} if meta.endpoint and meta.dim else None}
    if as_json:
        data = {k: {"value": cfg.shown(k, v) if v else v, "source": src}
                for k, (v, src) in info["values"].items()}
        out(render.dumps({"version": render.JSON_VERSION, "root": info["root"], "user_file": info["user_file"],
                          "user_file_exists": info["user_file_exists"], "project_file": info["project_file"],
                          "project_file_exists": info["project_file_exists"], "settings": data,
                          "budget": info["budget"], "recorded": info["recorded"]}))
    else:
        out(render.config_text(info))


class _ValueCommand(click.Command):
    """`folio config set KEY VALUE` where VALUE starts with `-` (`query_timeout -1`, a prefix `- `):
    the value, which then meets its check (the range, in one sentence), not an option click refuses
    as unknown. A `--word` stays an option (`--projcet` is told apart); `--` ends the options."""

    def parse_args(self, ctx, args):
        known = {n for p in self.get_params(ctx) for n in (*p.opts, *p.secondary_opts) if n.startswith("-")}
        options, rest = [], []
        for i, a in enumerate(args):
            if a == "--":
                rest += args[i + 1:]
                break
            (options if a in known or a.startswith("--") else rest).append(a)
        return super().parse_args(ctx, [*options, "--", *rest])


@config.command("set", cls=_ValueCommand)
@click.option("--project", is_flag=True, help="Write folio.yaml at the corpus root instead of the user config.")
@click.argument("key")
@click.argument("value")
def config_set(project, key, value):
    """Set KEY to VALUE in the user config (or folio.yaml with --project)."""
    from folio import config as cfg

    root = _corpus_root(required=False) or Path.cwd()
    path, value = cfg.set_value(key, value, project=project, root=root)
    err(f"{key} = {cfg.written(key, value)} written to {path}")
    why = cfg.overruled(key, root, project=project)
    if why:
        err(why)


@config.command("unset")
@click.option("--project", is_flag=True, help="Remove it from folio.yaml at the corpus root instead of the user config.")
@click.argument("key")
def config_unset(project, key):
    """Remove KEY from the user config (or folio.yaml with --project): the next source decides it."""
    from folio import config as cfg

    root = _corpus_root(required=False) or Path.cwd()
    from folio import render

    path, held = cfg.unset_value(key, project=project, root=root)
    err(f"{key} removed from {path}" if held else f"{path} does not set {key}: nothing to remove")
    try:
        s = cfg.resolve(root, {})
    except FolioError as e:
        err(f"note: the settings here cannot be read: {e}")
        return
    source, env = s.source(key), cfg.KEYS[key]["env"]
    there = (f"; `folio config unset --project {key}` removes it there" if source == cfg.PROJECT_FILE and not project
             else f"; `folio config unset {key}` removes it there" if source == "user config" and project
             else f"; unset {env} to leave it to the files" if env and source.startswith("env") else "")
    err(f"{key} is now {render.setting_value(key, s[key])} ({source}){there}")


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
    if not rep.ok:  # exit 1 ends stderr with its sentence, as every error does (the text's footer is on stdout)
        where = "each failed check's `summary`" if as_json else "each FAIL line"
        err(f"folio: {render.doctor_failed(rep)}: {where} says what to change")
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
@click.option("--http", "http", is_flag=True, help="Serve over MCP's streamable HTTP transport at /mcp instead of "
                                                   "stdio: one warm server for several agents.")
@click.option("--host", metavar="H", help="With --http: the address to listen on (default 127.0.0.1; another "
                                          "than loopback needs FOLIO_MCP_TOKEN).")
@click.option("--port", metavar="P", type=click.IntRange(0, 65535), help="With --http: the port (default 8765).")
def mcp(roots, http, host, port):
    """Serve query, show, status, ls, similar and index as MCP tools over stdio (for agent hosts).

    Register it with your agent host, e.g. `claude mcp add folio -- folio mcp`. Keeps each index
    open and the embeddings connection alive between questions, and the index current as files
    change; stdout carries only the protocol. With --http, one server at http://HOST:PORT/mcp
    serves every agent that connects (FOLIO_MCP_TOKEN set: each request must carry it as a bearer
    token).
    """
    if (host is not None or port is not None) and not http:
        raise click.UsageError(f"{'--host' if host is not None else '--port'} is for --http: add --http to "
                               f"serve over HTTP")
    from importlib.util import find_spec

    roots = _roots(roots)
    if find_spec("mcp") is None:
        raise FolioError("`folio mcp` needs the MCP SDK, one of folio's dependencies, and this environment "
                         "lacks it: install folio again as you installed it (`pipx install --force ...`, "
                         "`uv tool install --reinstall ...`, or the README's set-up command in a clone), or run "
                         "`pip install 'mcp>=2.3'` in folio's environment")
    if http:
        from folio import mcp_http

        mcp_http.check_bind(host or mcp_http.DEFAULT_HOST, mcp_http.token())  # before any index is opened
        mcp_http.serve(roots, host or mcp_http.DEFAULT_HOST, mcp_http.DEFAULT_PORT if port is None else port)
        return
    from folio import mcp as mcpmod

    mcpmod.serve(roots)


@cli.command()
def skill():
    """Print the bundled SKILL.md: how an agent should use folio."""
    from importlib import resources

    out(resources.files("folio").joinpath("SKILL.md").read_text(encoding="utf-8").rstrip("\n"))


# `folio --help` (and `folio config --help`) list each command on one line: a sentence of its own that
# fits 80 columns, where click cut the first sentence of its help off with `...`.
SHORT_HELP = {
    "config": "Show every setting and where it came from.",
    "doctor": "Probe the embeddings server before you trust it.",
    "index": "Index the Markdown under ROOT (default: this corpus).",
    "ls": "List the documents the --where filters keep.",
    "mcp": "Serve the commands to an agent host over MCP.",
    "query": "Rank the sections that answer a question.",
    "show": "Print a file's lines now, with a citation.",
    "similar": "The sections nearest a file's, or a draft's.",
    "skill": "Print SKILL.md, the guide for coding agents.",
    "status": "What the index holds and what changed since.",
    "unit": "Print a service file for this corpus's server.",
    "config set": "Set KEY to VALUE (user config, or --project).",
    "config show": "Show every setting (what `folio config` prints).",
    "config unset": "Remove KEY (user config, or --project).",
}
for _path, _text in SHORT_HELP.items():
    _cmd = cli
    for _part in _path.split():
        _cmd = _cmd.commands[_part]
    _cmd.short_help = _text


def main() -> None:
    """Entry point: run click without its own error handling, so errors render here, once (console.run)."""

    def call():
        try:
            return cli.main(standalone_mode=False, prog_name="folio")
        except click.NoSuchOption as e:
            usage.dash_hint(e)
            return usage.said(e)
        except click.UsageError as e:
            return usage.said(e)
        except click.exceptions.Exit as e:
            return e.exit_code
        except click.Abort as e:  # click's for Ctrl-C: the KeyboardInterrupt it came from may carry what was kept
            err(console.interrupted(e.__cause__ or e.__context__))
            return 130
        except click.ClickException as e:
            e.show()
            return e.exit_code

    sys.exit(console.run(call))
