"""`folio mcp` from a test: the MCP SDK's own clients against a real `folio mcp` subprocess, over
stdio or over streamable HTTP (a `folio mcp --http` started here and stopped with SIGTERM)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from helpers import folio_command, free_port

mcp_client = pytest.importorskip("mcp.client")
from mcp.client.stdio import StdioServerParameters  # noqa: E402


async def until(check, timeout: float = 30.0, what: str = "", every: float = 0.2):
    """Call the async `check` until it returns something true (or fail after `timeout` s, naming `what`)."""
    import anyio

    end = time.monotonic() + timeout
    while True:
        got = await check()
        if got:
            return got
        if time.monotonic() > end:
            raise AssertionError(f"not seen within {timeout} s" + (f": {what}" if what else ""))
        await anyio.sleep(every)


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "text", None) is not None)


@contextlib.asynccontextmanager
async def stdio(cwd: Path, *args: str, env: dict | None = None):
    """A `folio mcp` subprocess over stdio and the SDK client talking to it."""
    cmd = folio_command()
    params = StdioServerParameters(command=cmd[0], args=[*cmd[1:], "mcp", *args], cwd=str(cwd),
                                   env={**os.environ, **(env or {})})
    async with mcp_client.Client(params, read_timeout_seconds=120) as client:
        yield client


class HttpServer:
    """`folio mcp --http` as a subprocess: started, its URL known once it listens, stopped by SIGTERM."""

    def __init__(self, cwd: Path, *args: str, env: dict | None = None, port: int | None = None,
                 host: str = "127.0.0.1", nofile: tuple[int, int] | None = None):
        self.port = port or free_port()
        self.host = host

        def limit() -> None:  # `ulimit -n` (soft, hard) for the server alone
            import resource

            resource.setrlimit(resource.RLIMIT_NOFILE, nofile)

        self.proc = subprocess.Popen([*folio_command(), "mcp", "--http", "--port", str(self.port), *args],
                                     cwd=str(cwd), env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     preexec_fn=limit if nofile else None)
        self.url = f"http://{host}:{self.port}/mcp"

    def wait_ready(self, timeout: float = 60.0) -> None:
        import socket

        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise AssertionError(f"folio mcp --http exited {self.proc.returncode}: {self.proc.stderr.read()}")
            with contextlib.suppress(OSError), socket.create_connection((self.host, self.port), timeout=0.5):
                return
            time.sleep(0.05)
        raise AssertionError("folio mcp --http did not listen in time")

    def stop(self, timeout: float = 20.0) -> tuple[int, str, str]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
            raise AssertionError(f"folio mcp --http did not stop on SIGTERM within {timeout} s: {err}") from None
        return self.proc.returncode, out, err


def serving(server: HttpServer) -> None:
    """Wait until uvicorn answers HTTP (the socket listens before, from the start of the warm-up)."""
    import httpx

    end = time.monotonic() + 60
    while True:
        try:
            httpx.get(server.url, timeout=5)
            return
        except httpx.HTTPError:
            assert time.monotonic() < end, "folio mcp --http did not answer HTTP in time"
            time.sleep(0.1)


@contextlib.asynccontextmanager
async def http(url: str, token: str | None = None):
    """The SDK's streamable HTTP client at `url` (with a bearer token when given)."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with httpx2.AsyncClient(headers=headers, timeout=120) as hc, \
            mcp_client.Client(streamable_http_client(url, http_client=hc), read_timeout_seconds=120) as client:
        yield client
