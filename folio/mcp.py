"""`folio mcp`: the query, show, status and index commands as Model Context Protocol tools over
stdio, for agent hosts (Claude Code, Cursor, VS Code and others).

One search.Session is kept for the life of the server: each corpus's store stays open and one
embeddings client keeps its connection alive, so a question costs its own work only, not Python's
start-up. The session re-checks the index on every call (see search.Session). This module holds
no query logic: it turns arguments into a search.Request, and answers into the same objects
`folio ... --json` prints (structured content) beside the plain rendering (text content).
Errors come back as tool errors carrying the CLI's sentence; the session goes on. stdout carries
only the protocol (the SDK moves anything else printed there to stderr).
"""

import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Annotated

from folio.errors import FolioError

INSTRUCTIONS = (
    "folio finds the section of a Markdown corpus (docs, notes, specs, design records) that answers a "
    "question by meaning. A result is a reference (path:start-end and its heading trail), never a "
    "body: read those lines (the show tool) before you answer from them. Use grep/rg instead for an "
    "exact string, identifier, flag or error message, and to learn whether something is mentioned "
    "at all (a ranking always returns something).")

QUERY_DOC = (
    "Rank the sections of the Markdown corpus that answer a question in your own words (by meaning, "
    "so the words need not match). Beats grep when you do not know how the answer is worded; use "
    "grep/rg for an exact string, identifier or error message. Returns references "
    "(path:start-end, heading trail, score, freshness), not text: read the lines (show) before "
    "using them; a score only orders candidates, and the answer is often #2 or #3. Notices "
    "(lexical fallback, refreshed files) are in `notices`.")

SHOW_DOC = (
    "Read lines of a corpus file live, as `path:start-end` from a query result, with a citation: "
    "the file's sha when indexed and freshness (current, stale: the file changed since, the lines "
    "may have moved; missing).")

STATUS_DOC = (
    "What the index holds: files, sections, model and endpoint, frontmatter keys (and how many "
    "documents carry each: the keys `where` can filter on), files changed since indexing.")

INDEX_DOC = (
    "Bring the index up to date with the files on disk (incremental: only new and changed files "
    "are embedded), with the endpoint and model the index recorded. Queries already refresh the "
    "files behind their results; call this after many files changed or were added. Refused when "
    "another folio is writing the index.")


MODES = ("semantic", "lexical", "hybrid")


class Server:
    """The tools' bodies, over one search session (the SDK runs each call in a worker thread:
    one call at a time holds the session)."""

    def __init__(self, roots: list[Path]):
        from folio import config, search

        self.roots = roots
        self.settings = config.resolve(roots[0], {})
        self.session = search.Session(roots, self.settings)
        self.lock = threading.Lock()
        try:  # warm before the first question: imports, the index opened and mapped
            from folio import embed  # noqa: F401 - httpx

            for store in self.session.stores():
                store.matrix()
        except FolioError:
            pass  # said by the first call that needs the index

    def close(self) -> None:
        with self.lock:
            self.session.close()

    def query(self, query: str, limit: int = 5, where: list[str] | None = None,
              exclude_pointed_by: str | list[str] | None = None, identity: str = "id",
              mode: str | None = None, no_refresh: bool = False):
        from folio import render, search

        # Checked here rather than by the schema's validator, so the refusal is a folio sentence.
        if mode is not None and mode not in MODES:
            raise FolioError(f"mode {mode!r} is not one of {', '.join(MODES)}")
        if not 1 <= limit <= 1000:
            raise FolioError(f"limit {limit} is not in the range 1 to 1000 (rows to return)")
        if isinstance(exclude_pointed_by, str):
            exclude_pointed_by = [exclude_pointed_by]
        req = search.Request(query, limit, tuple(where or ()), tuple(exclude_pointed_by or ()), identity,
                             not no_refresh, mode or self.settings["mode"], want_confidence=True)
        with self.lock:
            answer = self.session.query(req)
        lines = [render.query_text(answer) if answer.hits else "no section matched"]
        lines += render.query_notes(answer, req.exclude_pointed_by, identity)
        band = render.band_text(answer.confidence) if answer.confidence else None
        if band:
            lines.append(band)
        return json.loads(render.query_json(answer)), "\n".join(lines)

    def show(self, ref: str):
        from folio import render
        from folio import show as showmod

        shown = showmod.show(self._root_of(ref), ref)
        if shown.freshness == "missing":
            raise FolioError(f"{render.shown_path(shown.root, shown.path)} no longer exists (it was indexed with sha "
                             f"{shown.sha}): the index drops it at its next update; query again to find where "
                             f"it went")
        text = render.show_text(shown)
        if shown.freshness == "stale":
            text += (f"\nnote: {render.shown_path(shown.root, shown.path)} changed since it was indexed: these "
                     f"lines may have moved; query again for a current reference")
        if shown.end < shown.asked_end:
            text += (f"\nnote: {render.shown_path(shown.root, shown.path)} has {shown.end} lines now; showed "
                     f"{shown.start}-{shown.end}")
        return json.loads(render.show_json(shown)), text

    def _root_of(self, ref: str) -> Path:
        """The served corpus holding the file a reference names (the innermost, when nested)."""
        from folio.show import parse_spec

        given = parse_spec(ref)[0]
        full = Path(os.path.normpath(os.path.join(os.getcwd(), os.path.expanduser(given))))
        inside = [r for r in self.roots if r == full or r in full.parents
                  or Path(os.path.realpath(r)) in Path(os.path.realpath(full)).parents]
        if not inside:
            if len(self.roots) == 1:
                return self.roots[0]  # show refuses it with the sentence naming the corpus
            raise FolioError(f"{given} lies in none of the served corpora ({', '.join(map(str, self.roots))})")
        return max(inside, key=lambda r: len(r.parts))

    def status(self):
        from folio import config, render
        from folio import status as statusmod

        infos = [statusmod.gather(root, config.resolve(root, {})) for root in self.roots]
        obj = infos[0] if len(infos) == 1 else {"roots": infos}
        return json.loads(render.dumps(obj)), "\n\n".join(render.status_text(i) for i in infos)

    def index(self):
        from folio import config, indexer, render

        reports, texts, errors = [], [], []
        for root in self.roots:
            rep = indexer.run(root, config.resolve(root, {}), wait=False, keep_space=True)
            reports.append({"version": render.JSON_VERSION, **rep.to_dict()})
            texts += [f"warning: {w}" for w in rep.warnings] + rep.notices + [render.index_text(rep)]
            if rep.error:
                errors.append(rep.error)
        obj = reports[0] if len(reports) == 1 else {"roots": reports}
        if errors:
            raise FolioError("\n".join(texts + errors))
        return json.loads(render.dumps(obj)), "\n".join(texts)


def build(server: Server):
    """The MCPServer with the four tools (names and arguments are a contract with agent set-ups)."""
    from mcp.server.mcpserver import MCPServer
    from mcp_types import CallToolResult, TextContent, ToolAnnotations
    from pydantic import Field

    from folio import __version__

    app = MCPServer("folio", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING")

    def answer(call, *args, **kwargs) -> CallToolResult:
        try:
            obj, text = call(*args, **kwargs)
        except FolioError as e:  # the CLI's sentence, as the tool's error; the session goes on
            return CallToolResult(content=[TextContent(type="text", text=f"folio: {e}")], is_error=True)
        except Exception as e:
            from folio.console import damaged

            if not damaged(e):
                raise  # the SDK answers with a tool error and logs the traceback on stderr
            return CallToolResult(content=[TextContent(type="text", text=(
                f"folio: the index is damaged ({e}); run `folio index --rebuild` to build it anew"))], is_error=True)
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=obj)

    read_only = ToolAnnotations(readOnlyHint=True, openWorldHint=False)

    @app.tool(description=QUERY_DOC, annotations=ToolAnnotations(readOnlyHint=False, openWorldHint=False))
    def query(
        query: Annotated[str, Field(description="The question, in your own words.")],
        limit: Annotated[int, Field(json_schema_extra={"minimum": 1, "maximum": 1000},
                                    description="Rows to return (after merging).")] = 5,
        where: Annotated[list[str] | None, Field(
            description="Frontmatter filters, ANDed: key=value (membership for lists), key (present), "
                        "!key (absent), key!=value (also when absent); '|' ORs whole predicates.")] = None,
        exclude_pointed_by: Annotated[str | None, Field(
            description="Drop documents whose identity appears in any document's value of this key "
                        "(e.g. supersedes).")] = None,
        identity: Annotated[str, Field(
            description="Frontmatter key holding a document's identity (@path: its file path).")] = "id",
        mode: Annotated[str | None, Field(
            json_schema_extra={"enum": list(MODES)},
            description="semantic (by meaning; the default unless configured), lexical (BM25F words "
                        "only) or hybrid (both rankings fused).")] = None,
        no_refresh: Annotated[bool, Field(
            description="Do not re-index changed files behind the results; mark them stale.")] = False,
    ) -> CallToolResult:
        return answer(server.query, query, limit, where, exclude_pointed_by, identity, mode, no_refresh)

    @app.tool(description=SHOW_DOC, annotations=read_only)
    def show(ref: Annotated[str, Field(description="path:start-end as a query result gives it.")]) -> CallToolResult:
        return answer(server.show, ref)

    @app.tool(description=STATUS_DOC, annotations=read_only)
    def status() -> CallToolResult:
        return answer(server.status)

    @app.tool(description=INDEX_DOC, annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False,
                                                                 idempotentHint=True, openWorldHint=False))
    def index() -> CallToolResult:
        return answer(server.index)

    return app


def serve(roots: list[Path]) -> None:
    """Serve until the client closes stdin (or SIGTERM); then exit 0 without a word."""
    def stop(_sig, _frame):
        # Whatever a tool was doing is safe to cut: the store's commit order makes a killed write
        # harmless, and the write lock is released with the process.
        try:
            sys.stderr.flush()
        finally:
            os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    server = Server(roots)
    try:
        build(server).run("stdio")
    finally:
        server.close()
