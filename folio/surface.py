"""How a sentence names one of folio's options: as the command line spells it (`--identity @path`),
or, while `folio mcp` answers a tool call, as that tool's argument (`identity: "@path"`). An agent
over MCP has no flags, so an answer, an error or a notice that names one would send it looking for
what it cannot pass.

Owns the surface in force (a context variable: each tool call runs in its own thread and context)
and the spelling. Must not build sentences: their builders call opt() where they name an option.
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
