"""A hostile HTTP server on a raw socket: every request it reads gets the same misbehaving answer.

Run as a script::

    python tests/hostileserver.py MODE [--port 0]

It prints one line, ``http://127.0.0.1:PORT``, once listening, then serves until killed (each
connection in its own thread). It reads a request (its head and a Content-Length body) before it
answers, so the client is never refused for writing. Modes (what issue 30 met, worst first):

- ``chunked``: HTTP 200, chunked, 64 KiB chunks without end, as fast as the client reads;
- ``huge-length``: ``Content-Length: 100000000000`` and a body as fast as the client reads;
- ``no-length``: neither length nor chunking (the body ends with the connection), without end;
- ``gzip-bomb``: ``Content-Encoding: gzip`` though folio asks for identity: 4 GiB of zeros in
  ~4 MB on the wire, streamed (one MiB of zeros compresses to the same block each time: nothing
  of 4 GiB is ever in memory here);
- ``trickle-head``: a status line and headers, one byte a second, that never end;
- ``trickle-body``: whole headers (a 1 MB Content-Length) and then the body one byte a second;
- ``continue``: ``HTTP/1.1 100 Continue`` answers without end, as fast as the client reads;
- ``continue-slow``: one ``100 Continue`` a second, without end;
- ``stall-huge``: ``Content-Length: 100000000000``, ten bytes, then silence;
- ``stall``: ``Content-Length: 2000``, ten bytes, then silence;
- ``garbage-status``: ``HTTP/1.1 OK then some`` (no status code) and a body;
- ``not-http``: an SSH banner, and the connection held open;
- ``headers``: a status line and then a million header lines;
- ``redirect``: HTTP 307 to ``/elsewhere/v1/embeddings`` on the same server;
- ``html-200`` / ``html-404``: a web server's HTML page (nginx's welcome page, its 404 page), to
  every request whatever its path or method: not an embeddings server at all.

Standard library only; no state between connections.
"""

from __future__ import annotations

import argparse
import socket
import sys
import threading
import time
import zlib

MODES = ("chunked", "huge-length", "no-length", "gzip-bomb", "trickle-head", "trickle-body", "continue",
         "continue-slow", "stall-huge", "stall", "garbage-status", "not-http", "headers", "redirect", "html-200", "html-404")
BLOCK = b"x" * 65536


def _read_request(conn: socket.socket) -> bytes | None:
    """The request's head (its body read and dropped), or None when the client went."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v.strip() or 0)
    while len(rest) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        rest += chunk
    return head


def bomb_parts(mib: int = 4096) -> tuple[bytes, bytes, int, bytes]:
    """(first, middle, count, tail): first + middle * count + tail is a gzip stream of `mib` MiB of
    zeros (a full flush after each MiB makes every compressed MiB after the first the same bytes).
    The tail's checksum is over all of it: 2 s of CPU, so `bomb_tail` makes it only when asked."""
    zeros = bytes(1 << 20)
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    first = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
    middle = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
    return first, middle, mib - 1, c.flush()[:-8]


def bomb_tail(end: bytes, mib: int = 4096) -> bytes:
    """The last block and the gzip trailer (CRC-32 and size of `mib` MiB of zeros)."""
    zeros = bytes(1 << 20)
    crc = 0
    for _ in range(mib):
        crc = zlib.crc32(zeros, crc)
    return end + crc.to_bytes(4, "little") + ((mib << 20) & 0xFFFFFFFF).to_bytes(4, "little")


_BOMB = None


def answer(conn: socket.socket, mode: str) -> None:
    global _BOMB
    send = conn.sendall
    if mode == "chunked":
        send(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"%x\r\n" % len(BLOCK) + BLOCK + b"\r\n"
        while True:
            send(chunk)
    elif mode in ("huge-length", "no-length"):
        length = b"Content-Length: 100000000000\r\n" if mode == "huge-length" else b"Connection: close\r\n"
        send(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + length + b"\r\n")
        while True:
            send(BLOCK)
    elif mode == "gzip-bomb":
        if _BOMB is None:
            _BOMB = bomb_parts()
        first, middle, count, end = _BOMB
        send(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
             b"Content-Length: %d\r\n\r\n" % (len(first) + len(middle) * count + len(end) + 8) + first)
        for _ in range(count // 256):
            send(middle * 256)
        send(middle * (count % 256) + bomb_tail(end))
    elif mode == "trickle-head":
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Slow: " + b"a" * 10_000_000
        for i in range(len(head)):
            send(head[i:i + 1])
            time.sleep(1)
    elif mode == "trickle-body":
        send(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n")
        while True:
            send(b" ")
            time.sleep(1)
    elif mode in ("continue", "continue-slow"):
        while True:
            send(b"HTTP/1.1 100 Continue\r\n\r\n" * (1 if mode == "continue-slow" else 1000))
            if mode == "continue-slow":
                time.sleep(1)
    elif mode in ("stall-huge", "stall"):
        length = b"100000000000" if mode == "stall-huge" else b"2000"
        send(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + length + b"\r\n\r\n{\"data\": [")
        time.sleep(3600)
    elif mode == "garbage-status":
        send(b"HTTP/1.1 OK then some\r\nContent-Length: 2\r\n\r\n{}")
        time.sleep(3600)
    elif mode == "not-http":
        send(b"SSH-2.0-OpenSSH_9.6\r\n")
        time.sleep(3600)
    elif mode == "headers":
        send(b"HTTP/1.1 200 OK\r\n")
        lines = b"".join(b"X-Many-%d: v\r\n" % i for i in range(1000))
        for _ in range(1000):
            send(lines)
        send(b"Content-Length: 2\r\n\r\n{}")
    elif mode == "redirect":
        send(b"HTTP/1.1 307 Temporary Redirect\r\nLocation: /elsewhere/v1/embeddings\r\nContent-Length: 0\r\n\r\n")
    elif mode in ("html-200", "html-404"):
        code = mode[5:].encode()
        page = (b"<!DOCTYPE html>\n<html>\n<head>\n<title>Welcome to nginx!</title>\n</head>\n<body>\n<h1>Welcome to "
                b"nginx!</h1>\n</body>\n</html>\n") if code == b"200" else \
            b"<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n<center><h1>404 Not Found</h1></center>\r\n" \
            b"<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
        send(b"HTTP/1.1 " + code + b" " + (b"OK" if code == b"200" else b"Not Found") + b"\r\nContent-Type: text/html"
             b"\r\nContent-Length: %d\r\n\r\n" % len(page) + page)


def serve(conn: socket.socket, mode: str) -> None:
    with conn:
        try:
            while _read_request(conn) is not None:
                answer(conn, mode)
                if mode not in ("redirect", "html-200", "html-404"):
                    break  # one answer a connection: what follows it is not for a next request
        except OSError:
            pass  # the client gave up: what this server is for


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=MODES)
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args(argv)
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", args.port))
    lsock.listen(64)
    print(f"http://127.0.0.1:{lsock.getsockname()[1]}", flush=True)
    while True:
        conn, _ = lsock.accept()
        threading.Thread(target=serve, args=(conn, args.mode), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
