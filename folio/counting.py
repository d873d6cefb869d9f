"""The token counts one index run asks the server for (POST /tokenize), asked once per text and
ahead of the plan.

A record longer than the server's token limit could be is counted before it is planned
(Session.count), one request each: on a corpus of long sections that is most of a run's requests,
and each waits for the server. Counts keeps every count this run got (by a digest of the text
sent, so the same section in many revisions of a file is counted once) and asks, `jobs` requests
at once in threads, for the texts of files the run will plan next (Session.count_ahead, fed by
`lookahead`), so the server counts while the run plans.

Owns the cache and the threads that count ahead: count() takes an answer asked ahead, waiting for
it if it is not in yet, and raises what asking it raised, where asking it then would have raised
it. Must not decide what is counted or divide records.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

KEEP = 1 << 16  # counts kept (~120 bytes each; the revisions of a file sit together); past it the oldest half goes
WAITING = 1 << 12  # counts asked ahead and not taken yet; past it they are dropped (asked again if needed)
DEPTH = 8  # files read ahead whose counts are asked before the run plans them


class Counts:
    def __init__(self, get_client: Callable):
        self.get_client = get_client
        self.known: dict[bytes, int] = {}  # digest of the text sent -> its count
        self.asked: dict = {}  # text sent -> (the Future of its task, its place in the task), asked ahead
        self.pool = self.client = None

    @staticmethod
    def key(sent: str) -> bytes:
        import hashlib  # (a no-op run never counts: not imported there)

        return hashlib.blake2b(sent.encode("utf-8", "surrogatepass"), digest_size=16).digest()

    def count(self, sent: str) -> int:
        """`sent`'s tokens as the server counts them; 0 when it does not count (no /tokenize)."""
        asked = self.asked.pop(sent, None)
        got = None
        if asked is not None and not asked[0].cancelled():
            got = asked[0].result()[asked[1]]  # (digest, count), the error asking it raised, or None
            if isinstance(got, Exception):
                raise got  # raised here, where asking now would have raised it
        if got is not None:
            k, got = got
        else:
            k = self.key(sent)
            got = self.known.get(k)
            if got is not None:
                return got
            got = self.get_client().count_tokens(sent) or 0
        self._keep(k, got)
        return got

    def submit(self, texts: list[str], jobs: int) -> None:
        """Ask for the counts of the texts not asked yet, as one task for one of `jobs` threads (a
        task per text would wake a thread, and hand the interpreter over, once per text)."""
        # (a count this run has, of a text in another file, is taken by count() itself, not through a task)
        need = [sent for sent in dict.fromkeys(texts) if sent not in self.asked and self.key(sent) not in self.known]
        if not need:
            return
        if len(self.asked) >= WAITING:
            self._drop()
        if self.pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self.pool = ThreadPoolExecutor(jobs, thread_name_prefix="folio-count")
            self.client = self.get_client()  # made here, on the run's thread
        task = self.pool.submit(self._ask, need)
        for i, sent in enumerate(need):
            self.asked[sent] = (task, i)

    def _ask(self, texts: list[str]) -> list:
        """In a thread: per text (digest, count), from the cache (only the run's thread writes it) or
        the server; at the first error, that error, and None for the texts after it (not asked)."""
        out: list = [None] * len(texts)
        for i, sent in enumerate(texts):
            k = self.key(sent)
            got = self.known.get(k)
            try:
                out[i] = k, got if got is not None else self.client.count_tokens(sent) or 0
            except Exception as e:  # noqa: BLE001 - raised by count() for this text
                out[i] = e
                break
        return out

    def _keep(self, k: bytes, value: int) -> None:
        if len(self.known) >= KEEP:
            for old in list(self.known)[:KEEP // 2]:
                del self.known[old]
        self.known[k] = value

    def _drop(self) -> None:
        for f, _i in self.asked.values():
            f.cancel()
        self.asked = {}

    def close(self) -> None:
        self._drop()
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None


def lookahead(items: Iterable, start: Callable[[object], None], depth: int = DEPTH) -> Iterator:
    """`items` in order, `start(item)` called for each `depth` items before it is yielded."""
    from collections import deque

    held: deque = deque()
    for item in items:
        start(item)
        held.append(item)
        if len(held) > depth:
            yield held.popleft()
    while held:
        yield held.popleft()
