"""The token counts one index run asks the server for (POST /tokenize), asked once per text.

A record longer than the server's token limit could be is counted before it is planned
(Session.count), one request each: on a corpus of long sections that is most of a run's requests,
and each waits for the server. Counts keeps every count this run got (by a digest of the text
sent, so the same section in many revisions of a file is counted once), and asks for the texts of
a file about to be fitted `jobs` at a time, in threads (Session.count_ahead), so their waits overlap.

Owns the cache, the threads that count ahead and their answers, errors included: an error met
ahead is raised by count() for that text, where asking it then would have raised it, so a failing
server is waited for once. Must not decide what is counted or divide records.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

KEEP = 1 << 18  # counts kept (~120 bytes each); past it the oldest half goes


class Counts:
    def __init__(self, get_client: Callable):
        self.get_client = get_client
        self.known: dict[bytes, int] = {}  # digest of the text sent -> its count
        self.errors: dict[bytes, Exception] = {}  # what asking ahead raised, for count() to raise
        self.pool = None

    @staticmethod
    def key(sent: str) -> bytes:
        return hashlib.blake2b(sent.encode("utf-8", "surrogatepass"), digest_size=16).digest()

    def count(self, sent: str) -> int:
        """`sent`'s tokens as the server counts them; 0 when it does not count (no /tokenize)."""
        k = self.key(sent)
        error = self.errors.pop(k, None)
        if error is not None:
            raise error  # raised where asking now would have raised it
        got = self.known.get(k)
        if got is None:
            got = self.get_client().count_tokens(sent) or 0
            self._keep(k, got)
        return got

    def ahead(self, texts: list[str], jobs: int) -> dict[str, int]:
        """{text: count} for `texts`, those not counted yet asked `jobs` at once; none after the first
        error (kept for count() to raise for its text)."""
        self.errors.clear()  # from an earlier file: its texts are asked anew
        out, need, keys = {}, [], {}
        for sent in texts:
            k = self.key(sent)
            got = self.known.get(k)
            if got is not None:
                out[sent] = got
            elif k not in keys:
                keys[k] = sent
                need.append((k, sent))
        if len(need) == 1:  # no other wait to overlap with
            k, sent = need[0]
            try:
                out[sent] = self.count(sent)
            except Exception as e:  # noqa: BLE001 - raised by count() for this text
                self.errors[k] = e
            return out
        if not need:
            return out
        if self.pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self.pool = ThreadPoolExecutor(jobs, thread_name_prefix="folio-count")
        client = self.get_client()
        futures = [(k, self.pool.submit(client.count_tokens, sent)) for k, sent in need]
        failed = False
        for k, f in futures:
            if failed:
                f.cancel()
                continue
            try:
                n = f.result() or 0
                self._keep(k, n)
                out[keys[k]] = n
            except Exception as e:  # noqa: BLE001 - raised by count() for this text
                self.errors[k] = e
                failed = True
        if failed:  # the ones under way end before the file goes on (their answers are asked anew)
            from concurrent.futures import wait

            wait([f for _k, f in futures])
        return out

    def _keep(self, k: bytes, value) -> None:
        if len(self.known) >= KEEP:
            for old in list(self.known)[:KEEP // 2]:
                del self.known[old]
        self.known[k] = value

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None
