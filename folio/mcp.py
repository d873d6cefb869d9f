"""`folio mcp`: the query, show, status, ls, similar and index commands as Model Context Protocol tools over
stdio, for agent hosts (Claude Code, Cursor, VS Code and others).

Search sessions are kept for the life of the server (one for the tools that may ask the embeddings
server, one for those that never do: Server): each corpus's store stays open and one embeddings
client keeps its connection alive, so a question costs its own work only, not Python's start-up. The session re-checks the index on every call (see search.Session). This module holds
no query logic: it checks the arguments (folio's own sentences, not a validator's dump: every
argument is published with its JSON Schema but taken as any JSON value), turns them into what the
commands take, and answers with the objects `folio ... --json` prints (structured content, declared
as each tool's output schema: folio/schemas.py) beside the plain rendering (text content). Every
sentence of a call is built over the MCP surface (folio.surface): it names tool arguments, never
CLI flags. Errors come back as tool errors carrying that sentence (an error that is still an answer,
as the CLI's exit 1 printing its object, carries that object too: Answered); the session goes on. A stdio
line that is not a JSON-RPC message gets JSON-RPC's error (-32700 or -32600: malformed), where the
SDK drops it. stdout carries only the protocol (the SDK moves anything else printed there to stderr).
"""

import contextlib
import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Annotated, Any

from folio.errors import FolioError
from folio.mcp_docs import (
    EXCLUDE_DOC,
    IDENTITY_DOC,
    INDEX_DOC,
    INSTRUCTIONS,
    LS_DOC,
    PASSAGE_DOC,
    QUERY_DOC,
    SHOW_DOC,
    SIMILAR_DOC,
    STATUS_DOC,
    WHERE_DOC,
    WORDS_DOC,
)

MODES = ("semantic", "lexical", "hybrid")


class Answered(FolioError):
    """An error that is still an answer, as the CLI's exit 1 that prints its object (show of a file gone,
    status or index with a corpus refused or work left undone): the tool error carries the object as
    structured content, beside the text and a `folio:` line for each sentence."""

    def __init__(self, sentences: list[str], obj: dict, text: str = ""):
        super().__init__("\n".join(sentences))
        self.sentences, self.obj, self.text = sentences, obj, text
REQUIRED = {"query": ["query"], "show": ["ref"]}  # the arguments a call must give


def _shown(value) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _text(name: str, value, example: str, *, missing_ok: bool = True) -> str | None:
    if value is None:
        if missing_ok:
            return None
        raise FolioError(f"{name} is missing: give e.g. {name}: {json.dumps(example)}")
    if not isinstance(value, str):
        raise FolioError(f"{name} {_shown(value)} is not a string: give e.g. {name}: {json.dumps(example)}")
    return value


def _texts(name: str, value, example: str) -> tuple[str, ...]:
    """A string or a list of strings, as one tuple (a string is one item)."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise FolioError(f"{name} {_shown(value)} is neither a string nor a list of strings: give e.g. "
                     f"{name}: {json.dumps(example)} or {name}: {json.dumps([example])}")


def _flag(name: str, value) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise FolioError(f"{name} {_shown(value)} is not true or false")
    return value


def _limit(value) -> int:
    if value is None:
        return 5
    whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if isinstance(value, bool) or not whole or not 1 <= value <= 1000:
        raise FolioError(f"limit {_shown(value)} is not a whole number from 1 to 1000: give the rows to return, "
                         f"e.g. limit: 10")
    return int(value)


def _required(schema: dict, names: list[str]) -> dict:
    """An input schema with `names` required (and no default shown for them)."""
    if not names:
        return schema
    props = {k: ({f: v for f, v in p.items() if f != "default"} if k in names else p)
             for k, p in schema.get("properties", {}).items()}
    return {**schema, "properties": props, "required": names}


class Server:
    """The tools' bodies, over two search sessions (the SDK runs each call in a worker thread: one
    call at a time holds a session). `session` answers the calls that may ask the embeddings
    server (query, similar); `reading` those that never do (show, ls), so that over HTTP, with
    several agents, a question waiting on a slow or hung server holds up no show or ls. A question's
    `query_timeout` runs from the call's arrival, its wait for the session included: questions
    queued behind a hung server each answer within it, not one after another."""

    def __init__(self, roots: list[Path]):
        from folio import config, search

        self.roots = roots
        self.settings = config.resolve(roots[0], {})
        self.session = search.Session(roots, self.settings)
        self.lock = threading.Lock()
        self.reading = search.Session(roots, self.settings)
        self.read_lock = threading.Lock()
        self.client_fd: int | None = None  # a copy of the stdin the client writes to, watched during `index`
        try:  # warm before the first question: imports, the index opened and mapped
            from folio import embed  # noqa: F401 - httpx

            for store in self.session.stores():
                store.matrix()
            self.reading.stores()
        except FolioError:
            pass  # said by the first call that needs the index

    def close(self) -> None:
        with self.lock:
            self.session.close()
        with self.read_lock:
            self.reading.close()

    def _deadline(self) -> float:
        """When a question arriving now stops waiting on the server (time.monotonic())."""
        import time

        return time.monotonic() + self.settings["query_timeout"]

    def query(self, query=None, limit=None, where=None, exclude_pointed_by=None, identity=None, mode=None,
              no_refresh=None, words=None, passage=None):
        from folio import facets, render, search

        text = _text("query", query, "how are retries configured?", missing_ok=False)
        if mode is not None and mode not in MODES:
            raise FolioError(f"mode {_shown(mode)} is not one of {', '.join(MODES)}")
        words = None if words is None else " ".join(_texts("words", words, "retry backoff"))  # a phrase counts as its words
        passages = _texts("passage", passage, "Retries back off exponentially, doubling the delay each time.")
        why = facets.problem(text, words, passages, cli=False)
        if why:
            raise FolioError(why)
        req = search.Request(text, _limit(limit), _texts("where", where, "status=Final"),
                             _texts("exclude_pointed_by", exclude_pointed_by, "supersedes"),
                             _text("identity", identity, "@path") or "id", not _flag("no_refresh", no_refresh),
                             mode or self.settings["mode"], want_confidence=True, words=words, passages=passages)
        deadline = self._deadline()
        with self.lock:
            answer = self.session.query(req, deadline)
        lines = [render.query_text(answer) if answer.hits else "no section matched"]
        lines += render.query_notes(answer, req.exclude_pointed_by, req.identity)
        filtered_out = not answer.hits and bool(req.where or req.exclude_pointed_by)
        band = render.band_text(answer.confidence, filtered_out=filtered_out) if answer.confidence else None
        if band:
            lines.append(band)
        return json.loads(render.query_json(answer)), "\n".join(lines)

    def show(self, ref=None, sha=None, trail=None):
        from folio import render
        from folio import show as showmod

        ref = _text("ref", ref, "docs/client.md:40-72", missing_ok=False)
        if trail is not None and sha is None:
            raise FolioError('trail goes with sha: give the query row\'s citation.sha too (sha: "516bef067812")')
        said = None if sha is None else showmod.Said(showmod.parse_sha(sha),
                                                     None if trail is None else showmod.parse_trail(trail))
        root, cwd = self._place(ref)
        shown = showmod.show(root, ref, cwd, said=said)
        if shown.freshness == "missing":
            raise Answered([f"{render.quote(shown.path)} no longer exists (it was indexed with sha {shown.sha}): the "
                            f"index drops it at its next update; query again to find where it went"],
                           json.loads(render.show_json(shown, [])))
        # the citation names the file as the query row's `path` does (root-relative), wherever this server runs
        path = render.quote(shown.path)
        where = f" in {render.quote(str(root))}" if len(self.roots) > 1 else ""  # which corpus's docs/a.md
        since = shown.since_row
        text = (f"{shown.text}\n-- {path}:L{shown.start}-L{shown.end}{where} (sha {shown.sha or '-'}, "
                f"{shown.freshness}{render.since_row_text(since)})")
        notes = []
        vouched = since is not None and since["state"] in ("same", "in_place", "moved")  # the row's section, found now
        if shown.freshness == "stale" and not vouched:
            notes.append(f"{path} changed since it was indexed: these lines may have moved; query again for a "
                         f"current reference")
        if since is not None and since["state"] in ("in_place", "moved"):
            notes.append(render.since_row_note(path, since, shown))
        if shown.end < shown.asked_end:
            notes.append(f"{path} {showmod.lines_now(shown.end)}; showed {shown.start}-{shown.end}")
        text += "".join(f"\nnote: {n}" for n in notes)
        if since is not None and since["state"] in ("not_found", "changed"):
            raise Answered([showmod.since_sentence(path, since)], json.loads(render.show_json(shown, notes)), text)
        return json.loads(render.show_json(shown, notes)), text

    def similar(self, ref=None, text=None, limit=None, where=None, exclude_pointed_by=None, identity=None,
                no_refresh=None):
        from folio import render, search
        from folio import similar as simmod
        from folio.walk import corpus_path

        ref = _text("ref", ref, "docs/client.md:40-72")
        text = _text("text", text, "a draft note")
        if (ref is None) == (text is None):
            raise FolioError("give either ref (a section or file to start from, e.g. ref: \"docs/client.md:40-72\") "
                             "or text (a draft to compare)" + (", not both" if ref is not None else ""))
        if text is not None and not text.strip():
            raise FolioError("text is empty: give the draft to compare (e.g. text: \"# Retries\\n\\nWe back off "
                             "exponentially.\"), or a ref instead")
        req = search.Request(ref or "-", _limit(limit), _texts("where", where, "status=Final"),
                             _texts("exclude_pointed_by", exclude_pointed_by, "supersedes"),
                             _text("identity", identity, "@path") or "id", not _flag("no_refresh", no_refresh),
                             "semantic")
        if text is not None:
            source = simmod.Source("-", text=text)
        else:
            given, start, end = simmod.parse(ref, Path.cwd())
            root, base = self._place(ref, given)
            source = simmod.Source(ref, root, corpus_path(root, given, base), start, end)
        deadline = self._deadline()
        with self.lock:
            sim = simmod.run(self.session, source, req, deadline)
        lines = [render.similar_text(sim) if sim.answer.hits else "no section matched"]
        lines += render.query_notes(sim.answer, req.exclude_pointed_by, req.identity)
        return json.loads(render.similar_json(sim)), "\n".join(lines)

    def _place(self, ref: str, given: str | None = None) -> tuple[Path, Path | None]:
        """(the served corpus holding the file a reference names, the directory its path is relative
        to: None for this server's working directory). A query row's `path` is relative to its
        corpus root, whatever this server's working directory: a relative path that a served index
        holds, or that names a file under a served root, is read from that root; any other is the
        row's `ref` (relative to this server's working directory) or an absolute path."""
        from folio.show import parse_spec
        from folio.store import sqlite_damage
        from folio.walk import corpus_path

        given = parse_spec(ref)[0] if given is None else given
        if not os.path.isabs(os.path.expanduser(given)):
            held = []
            roots = self.reading.roots
            # each store is read under the lock: another call's stores() closes one whose index.db was
            # replaced (a `folio index --rebuild`), and a stamp() read after it said the index was damaged
            with self.read_lock:
                for root in roots:
                    try:
                        rel = corpus_path(root, given, root)
                    except FolioError:
                        continue  # leaves this corpus
                    try:
                        [store] = self.reading.stores(without=[r for r in roots if r != root])
                        indexed = store.stamp(rel) is not None
                    except Exception as e:  # this corpus's index unreadable: the others' files are still shown
                        if not isinstance(e, FolioError) and not sqlite_damage(e):
                            raise
                        indexed = False  # its file on disk is still its: show then says why it cannot cite it
                    if indexed or os.path.isfile(os.path.join(root, rel)):
                        held.append(root)
            if len(held) == 1:
                return held[0], held[0]
            if held and not os.path.exists(given):
                raise FolioError(f"{given} is a path in several served corpora ({', '.join(map(str, held))}): give "
                                 f"the query row's `ref`, or the absolute path")
        full = Path(os.path.normpath(os.path.join(os.getcwd(), os.path.expanduser(given))))
        inside = [r for r in self.roots if r == full or r in full.parents
                  or Path(os.path.realpath(r)) in Path(os.path.realpath(full)).parents]
        if not inside:
            if len(self.roots) == 1:
                return self.roots[0], self.roots[0]  # show refuses it with the sentence naming the corpus
            raise FolioError(f"{given} lies in none of the served corpora ({', '.join(map(str, self.roots))}): "
                             f"give the path as a query row gives it")
        return max(inside, key=lambda r: len(r.parts)), None

    def status(self, key=None, truncated=None):
        from folio import config, render
        from folio import status as statusmod

        key = _text("key", key, "status")
        if key is not None and not key.strip():
            raise FolioError('key is empty: name a frontmatter key (the status tool without key lists them), '
                             'e.g. key: "status"')
        if _flag("truncated", truncated):
            if key is not None:
                raise FolioError("truncated lists cut records; key lists a key's values: give one of them")
            cut, refused = statusmod.each(self.roots, lambda root: (root, statusmod.truncated(root)))
            if refused and cut:  # one corpus refused (a damaged index): the others said, then why
                raise Answered(refused, json.loads(render.truncated_json(cut)), render.truncated_text(cut))
            if refused:
                raise FolioError("\n".join(refused))
            return json.loads(render.truncated_json(cut)), render.truncated_text(cut)
        infos, refused = statusmod.each(self.roots, lambda root: statusmod.gather(root, config.resolve(root, {}),
                                                                                  key=key))
        obj = json.loads(render.dumps(render.status_json(infos, several=len(self.roots) > 1)))
        if key:
            text = "\n\n".join(render.key_values_text(info, key, len(self.roots) > 1) for info in infos)
        else:
            text = "\n\n".join(render.status_text(i) for i in infos)
        if refused and infos:  # the corpora it could read, as `folio status --json` prints them on exit 1
            raise Answered(refused, obj, text)
        if refused:
            raise FolioError("\n".join(refused))
        return obj, text

    def ls(self, where=None, exclude_pointed_by=None, identity=None, key=None):
        from folio import filters, render
        from folio import ls as lsmod

        where = _texts("where", where, "status=Final")
        exclude = _texts("exclude_pointed_by", exclude_pointed_by, "supersedes")
        identity = _text("identity", identity, "@path") or "id"
        keys = _texts("key", key, "status")
        filters.parse(where, exclude, identity)  # refused before any index is read
        with self.read_lock:
            listing = lsmod.leaving_out_damaged(self.roots, lambda kept: lsmod.gather(
                self.reading.stores(without=[r for r in self.roots if r not in kept]), where, exclude, identity,
                self.settings))
        notes = listing.notices + render.filter_notes(listing.hints, listing.dropped, exclude, identity)
        notes += render.key_notes(listing.documents, keys)
        text = render.ls_text(listing.documents, keys) if listing.documents else "no document matched"
        obj = json.loads(render.ls_json(listing.documents, listing.roots, notes, listing.dropped, keys))
        return obj, "\n".join([text, *notes])

    def index(self):
        from folio import config, indexer, render
        from folio.store import held_here

        reports, texts, errors = [], [], []
        done = threading.Event()
        if self.client_fd is not None:  # an index run may take hours: not for a client that has left
            threading.Thread(target=_exit_when_gone, args=(self.client_fd, done), daemon=True).start()
        runs, refused = [], []
        try:
            for root in self.roots:  # one corpus refused (another writer, a damaged index) leaves the others indexed
                try:  # this server's own writer (its live index, a query's refresh) is waited for; another folio's not
                    runs.append(indexer.words_first(root, config.resolve(root, {}), wait=held_here(root),
                                                    keep_space=True))
                except FolioError as e:
                    said = str(e)
                    refused.append(said if len(self.roots) == 1 or str(root) in said else f"{root}: {said}")
        finally:
            done.set()
        errors += refused
        if refused and not runs:
            raise FolioError("\n".join(refused))
        for rep in runs:
            reports.append({"version": render.JSON_VERSION, **rep.to_dict()})
            texts += [f"warning: {w}" for w in rep.warnings] + rep.notices + [render.index_text(rep)]
            if rep.error:
                errors.append(rep.error)
        obj = json.loads(render.dumps(reports[0] if len(reports) == 1 else
                                      {"version": render.JSON_VERSION, "roots": reports}))
        if errors:  # work left undone: the reports still, as `folio index --json` prints its report on exit 1
            raise Answered(errors, obj, "\n".join(texts))
        return obj, "\n".join(texts)


def _exit_when_gone(fd: int, done: threading.Event) -> None:
    """Until `done`: when the client closes its end of stdin (it has left, so nobody will read the
    answer), end the process as SIGTERM does: the index run stops where it is, keeping what it
    committed (the store's commit order makes a cut write harmless; the lock and the run's children
    go with the process)."""
    import select

    hup = select.POLLHUP | getattr(select, "POLLRDHUP", 0)
    try:
        poll = select.poll()
        poll.register(fd, hup)
        while not done.is_set():
            if any(ev & hup for _fd, ev in poll.poll(200)) and not done.is_set():
                sys.stderr.flush()
                os._exit(0)
    except (OSError, ValueError):
        return  # a stdin that cannot be polled: the call runs to its end, as before


def malformed(exc: Exception, line: int):
    """The JSON-RPC 2.0 error answering input line `line`, which the SDK could not read as a message
    (`exc`, its pydantic ValidationError): -32700 for a line that is not JSON, -32600 for JSON that
    is not a JSON-RPC message (with the line's id when it has one a reply can carry, else null).
    None for a blank line: no message, nothing to answer."""
    import re

    from mcp_types import INTERNAL_ERROR, INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError

    errors = exc.errors() if hasattr(exc, "errors") else []
    if not errors:
        return JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(
            code=INTERNAL_ERROR, message=f"line {line} of the input could not be read ({exc})"))
    if errors[0]["type"] == "json_invalid":
        if isinstance(errors[0].get("input"), str) and not errors[0]["input"].strip():
            return None
        why = re.sub(r"^Invalid JSON: ", "", errors[0]["msg"])
        why = re.sub(r" at line 1 column (\d+)$", r" at column \1", why)
        why = re.sub(r" at line \d+ column \d+$", " at its end", why)
        return JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(
            code=PARSE_ERROR, message=f"Parse error: line {line} of the input is not JSON ({why}): send each "
                                      f"message as one line of JSON"))
    whole = next((e["input"] for e in errors if len(e["loc"]) <= 1 or e["type"] == "missing"), None)
    given = whole.get("id") if isinstance(whole, dict) else None
    ident = given if isinstance(given, str) or (isinstance(given, int) and not isinstance(given, bool)) else None
    return JSONRPCError(jsonrpc="2.0", id=ident, error=ErrorData(
        code=INVALID_REQUEST, message=f"Invalid Request: line {line} of the input is JSON but not a JSON-RPC 2.0 "
                                      f"message: send an object with \"jsonrpc\": \"2.0\", a \"method\" string, "
                                      f"and an \"id\" for a request"))


def unknown_sentence(tool: str, unknown: list[str], known: list[str]) -> str:
    """The error for arguments a tool does not take, naming what it takes."""
    import difflib

    what = ", ".join(f"`{a}`" for a in unknown)
    near = [m for a in unknown for m in (["ref"] if a in ("path", "file") and "ref" in known else
                                         difflib.get_close_matches(a, known, n=1))]
    hint = f" (did you mean {', '.join(f'`{m}`' for m in near)}?)" if near else ""
    root = ("; the corpora are the ones `folio mcp` was started on (its --root)"
            if any(a in ("root", "roots", "dir") for a in unknown) else "")
    takes = ", ".join(f"`{a}`" for a in known) or "no argument"
    return f"the {tool} tool takes no {what}{hint}{root}: it takes {takes}"


def build(server: Server):
    """The MCPServer with the six tools (names and arguments are a contract with agent set-ups)."""
    from mcp.server.mcpserver import MCPServer
    from mcp_types import CallToolResult, TextContent, ToolAnnotations
    from pydantic import Field, PlainValidator, WithJsonSchema

    from folio import __version__, schemas, surface

    class App(MCPServer):
        async def list_tools(self):
            # Each tool's output schema: the object its --json prints (the SDK derives none for a
            # tool that builds its own CallToolResult); the arguments a call needs (taken with a
            # default so that leaving one out gets folio's sentence, not the validator's).
            return [t.model_copy(update={"output_schema": schemas.OUTPUTS[t.name],
                                         "input_schema": _required(t.input_schema, REQUIRED.get(t.name, []))})
                    for t in await super().list_tools()]

        async def call_tool(self, name, arguments, context=None):
            # An argument the tool does not take (a misspelling, or `root`: a session's corpora are
            # set when `folio mcp` starts) would be dropped without a word by the SDK's validation.
            tool = self._tool_manager.get_tool(name)
            known = list(tool.parameters.get("properties", {})) if tool is not None else None
            unknown = [a for a in (arguments or {}) if known is not None and a not in known]
            if unknown:
                said = unknown_sentence(name, unknown, known)
                return CallToolResult(content=[TextContent(type="text", text=f"folio: {said}")], is_error=True)
            return await super().call_tool(name, arguments, context)

        async def run_stdio_async(self):
            # The SDK's own loop, with a relay between the wire and the session: a line that is not
            # JSON, or not a JSON-RPC message, reaches the session as an exception, which it drops
            # without a word (the client waits for ever); JSON-RPC 2.0 answers it with an error.
            import anyio
            from mcp.server.stdio import stdio_server
            from mcp.shared.message import SessionMessage

            async with stdio_server() as (wire, write):
                send, receive = anyio.create_memory_object_stream(0)

                async def relay():
                    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                        async with send, wire:
                            line = 0
                            async for item in wire:
                                line += 1  # the SDK reads one item per line
                                if not isinstance(item, Exception):
                                    await send.send(item)
                                elif (reply := malformed(item, line)) is not None:
                                    await write.send(SessionMessage(reply))

                async with anyio.create_task_group() as tg:
                    tg.start_soon(relay)
                    low = self._lowlevel_server
                    await low.run(receive, write, low.create_initialization_options())
                    tg.cancel_scope.cancel()

    app = App("folio", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING")

    def arg(schema: dict, description: str):
        """An argument published with its JSON Schema and taken as any JSON value: Server checks it.
        One published as a string is annotated `str`, so the SDK never reads it as JSON first (a
        question "[draft] notes" or "null" stays the text it is); any value still reaches Server."""
        kind = str if schema.get("type") == "string" else Any
        return Annotated[kind, PlainValidator(lambda v: v), WithJsonSchema({**schema, "description": description}),
                         Field(description=description)]

    def answer(call, *args) -> CallToolResult:
        try:
            with surface.over_mcp():
                obj, text = call(*args)
        except Answered as e:  # an error that is still an answer: its object too (the SDK validates no error's)
            said = "\n".join([*([e.text] if e.text else []), *(f"folio: {s}" for s in e.sentences)])
            return CallToolResult(content=[TextContent(type="text", text=said)], structured_content=e.obj,
                                  is_error=True)
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
    texts = schemas.TEXT_OR_TEXTS
    where_arg = arg(texts, WHERE_DOC)
    exclude_arg = arg(texts, EXCLUDE_DOC)
    identity_arg = arg({"type": "string"}, IDENTITY_DOC)

    @app.tool(description=QUERY_DOC, annotations=ToolAnnotations(readOnlyHint=False, openWorldHint=False))
    def query(
        query: arg({"type": "string"}, "The question, in your own words.") = None,
        limit: arg({"type": "integer", "minimum": 1, "maximum": 1000},
                   "Rows to return (after merging touching sections).") = 5,
        where: where_arg = None,
        exclude_pointed_by: exclude_arg = None,
        identity: identity_arg = "id",
        mode: arg({"type": "string", "enum": list(MODES)},
                  "hybrid (both rankings fused; a section with no vector yet is ranked by its words; the "
                  "built-in default), semantic (by meaning only; leaves out sections with no vector yet, and a "
                  "notice says how many) or lexical (BM25F: by the words themselves, every section, no server "
                  "needed). Omitted: the default mode (`folio config` shows it and where it was set).") = None,
        no_refresh: arg({"type": "boolean"}, "Do not re-index changed files behind the results; mark them stale.") = False,
        words: arg(texts, WORDS_DOC) = None,
        passage: arg(texts, PASSAGE_DOC) = None,
    ) -> CallToolResult:
        return answer(server.query, query, limit, where, exclude_pointed_by, identity, mode, no_refresh, words,
                      passage)

    @app.tool(description=SHOW_DOC, annotations=read_only)
    def show(
        ref: arg({"type": "string"}, "path:start-end: a query row's `path` (relative to the corpus root) with its "
                                     "start-end, or its `ref`.") = None,
        sha: arg({"type": "string"}, "The query row's citation.sha: if the file changed since that row, say so, and "
                                     "show the section the row named where it is now (found by its trail).") = None,
        trail: arg(texts, "With sha: the query row's `trail` (a list of headings), to find its section by when the "
                          "file changed since the row.") = None,
    ) -> CallToolResult:
        return answer(server.show, ref, sha, trail)

    @app.tool(description=STATUS_DOC, annotations=read_only)
    def status(
        key: arg({"type": "string"}, "A frontmatter key: every value it holds, with how many documents hold "
                                     "each (in `frontmatter_values`).") = None,
        truncated: arg({"type": "boolean"},
                       "List the records whose over-long single line was cut, instead of the status.") = False,
    ) -> CallToolResult:
        return answer(server.status, key, truncated)

    @app.tool(description=LS_DOC, annotations=read_only)
    def ls(
        where: where_arg = None,
        exclude_pointed_by: exclude_arg = None,
        identity: identity_arg = "id",
        key: arg(texts, "A frontmatter key, or a list of them: each document's `frontmatter` holds only these "
                        "(and keys nested under them); the text lists their values after each path.") = None,
    ) -> CallToolResult:
        return answer(server.ls, where, exclude_pointed_by, identity, key)

    @app.tool(description=SIMILAR_DOC, annotations=ToolAnnotations(readOnlyHint=False, openWorldHint=False))
    def similar(
        ref: arg({"type": "string"}, "The source: a file (its path as a query row gives it) or one of its sections "
                                     "(path:start-end, a query row's `path` with its range, or its `ref`).") = None,
        text: arg({"type": "string"}, "Instead of ref: a text (e.g. the note you are about to write), embedded "
                                      "by the embeddings server and compared as a document.") = None,
        limit: arg({"type": "integer", "minimum": 1, "maximum": 1000}, "Rows to return.") = 5,
        where: where_arg = None,
        exclude_pointed_by: exclude_arg = None,
        identity: identity_arg = "id",
        no_refresh: arg({"type": "boolean"}, "Do not re-index the source file when it changed.") = False,
    ) -> CallToolResult:
        return answer(server.similar, ref, text, limit, where, exclude_pointed_by, identity, no_refresh)

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
    follower = follow(roots)
    with contextlib.suppress(OSError):  # the SDK moves the wire off fd 0: watch it through a copy of our own
        server.client_fd = os.dup(0)
    try:
        build(server).run("stdio")
    finally:
        if follower is not None:
            follower.stop()
        server.close()
    if follower is not None:  # a run under way is cut as SIGTERM cuts it: its committed batches stay
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def follow(roots: list[Path]):
    """Keep the served indexes current while the server runs (folio.watch, in daemon threads), unless
    every root's `watch` setting is off; each burst's outcome is one line on stderr (the host's log)."""
    from folio import config, render, watch
    from folio.console import err

    settings = {root: config.resolve(root, {}) for root in roots}
    followed = [root for root in roots if settings[root]["watch"] != "off"]
    if not followed:
        return None

    def log(o) -> None:
        if not o.quiet:
            err(render.one_line(f"folio: {watch.outcome_text(o, root=len(roots) > 1)}"))

    follower = watch.Follower(followed, on_outcome=log, say=lambda s: err(f"folio: {s}"), keep_space=True,
                              settings_of=lambda root: config.resolve(root, {}))
    follower.start()
    return follower
