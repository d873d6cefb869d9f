"""How a sentence names one of folio's options: as the command line spells it (`--identity @path`),
or, while `folio mcp` answers a tool call, as that tool's argument (`identity: "@path"`). An agent
over MCP has no flags, so an answer, an error or a notice that names one would send it looking for
what it cannot pass.

Owns the surface in force (a context variable: each tool call runs in its own thread and context)
and the spelling of options, arguments and commands. Must not build sentences: their builders call
opt(), given(), tool() and invoke() where they name one, or ask mcp() where the fix itself differs (a
file on stdin is the `text` argument).
"""

from __future__ import annotations

import contextlib
import contextvars
import json

_MCP = contextvars.ContextVar("folio_mcp_surface", default=False)


def mcp() -> bool:
    """Whether this sentence is for an MCP tool call."""
    return _MCP.get()


@contextlib.contextmanager
def over_mcp():
    """Sentences built inside name MCP tool arguments instead of CLI flags."""
    token = _MCP.set(True)
    try:
        yield
    finally:
        _MCP.reset(token)


def opt(flag: str, value=None, *, quoted: bool = False) -> str:
    """`--where 'a=b'` (quoted: the value as Python's repr, as the CLI's sentences quote a predicate)
    or `--identity @path` on the command line; `where: "a=b"`, `identity: "@path"` over MCP (the
    argument's name, the value as JSON). Without a value: `--where` / `where`."""
    if mcp():
        name = flag.lstrip("-").replace("-", "_")
        return name if value is None else f"{name}: {json.dumps(value, ensure_ascii=False)}"
    if value is None:
        return flag
    return f"{flag} {value!r}" if quoted else f"{flag} {value}"


def given(name: str, value: str) -> str:
    """A command's argument as given: `docs/a.md:1-3` on the command line (a positional one has no
    flag to name); `ref: "docs/a.md:1-3"` over MCP, where the tool takes it as `name`."""
    return f"{name}: {json.dumps(value, ensure_ascii=False)}" if mcp() else f"`{value}`"


def tool(command: str) -> str:
    """`folio ls` on the command line; the ls tool over MCP (for a command the tools have)."""
    return f"the {command} tool" if mcp() else f"`folio {command}`"


def invoke(command: str) -> str:
    """"run `folio index`" on the command line; "call the index tool" over MCP."""
    return f"call the {command} tool" if mcp() else f"run `folio {command}`"


def as_printed() -> str:
    """How a path or range is written: as the command line prints it, or as the query tool's rows give it."""
    return "as a query row gives it" if mcp() else "as `folio query` prints it"
