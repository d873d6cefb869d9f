"""Embedding a run's texts through its session: requests of the target's batch size, sent by `jobs`
threads, and the input at fault found by bisection when the server refuses a request.

Owns the rule that tells a refused input from a failing server: an input the server refuses comes
back as a refusal (its index and error) for the caller to divide or skip; a server that fails the
fixed fingerprint probe alike, or fails every input of a request, is failing (ServerFailed); and
answers that came while a connection was lost are kept only once the server is asked whether it
still serves the run's vector space (Session.same_space_still: a restart with another --pooling).
Must not divide records, touch the store or print.
"""

from __future__ import annotations


class ServerFailed(Exception):
    """The server could not embed even the fixed probe text: it is failing, not refusing an input."""

    def __init__(self, error):
        super().__init__(str(error))
        self.error = error


def embed(session, texts: list[str], labels: list[str]) -> tuple[list, list[tuple[int, object]]]:
    """Vectors for texts (None where the server refused a text); plus (index, error) refusals.
    `session`: the run's Session (its client and target). When a request fails, the error raised
    carries `partial`: the same pair for the requests answered before it (None where none came)."""
    from folio.reader import reader_text

    client = session.get_client()
    target = session.target
    out: list = [None] * len(texts)
    refused: list = []
    lost = client.lost  # a connection lost meanwhile: the server may have been restarted in another space
    size = target.batch_size
    read = session.read  # reader texts counting the records' tokens already made
    sent = [read.pop(t, None) or reader_text(t) for t in texts]
    chunks = [(i, sent[i:i + size], labels[i:i + size]) for i in range(0, len(sent), size)]

    def run(chunk):
        start, part, labs = chunk
        return start, _embed_chunk(client, target, part, labs)

    # A request that fails ends the sending, but the answers already in hand are kept: the error
    # carries them (`partial`, as this function returns them) for the caller to commit. So does
    # Ctrl-C (KeyboardInterrupt, SIGTERM's too): the answers that came before it are not lost.
    results, failure = [], None
    if target.jobs > 1 and len(chunks) > 1:
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(target.jobs)
        futures = [pool.submit(run, c) for c in chunks]
        taken = 0
        try:
            for f in futures:
                taken += 1
                if f.cancelled():
                    continue
                try:
                    results.append(f.result())
                except Exception as e:
                    if failure is None:
                        failure = e
                        for g in futures:
                            g.cancel()  # not sent yet: not sent at all
        except KeyboardInterrupt as e:
            failure = e
            for g in futures:
                g.cancel()
        finally:
            try:
                pool.shutdown(wait=True)  # the requests under way end (each within its timeout)
            except KeyboardInterrupt as e:  # again while they do: they are not waited for
                failure = e
                pool.shutdown(wait=False, cancel_futures=True)
        if isinstance(failure, KeyboardInterrupt):  # what came back before the end is kept too
            results += [g.result() for g in futures[max(0, taken - 1):] if g.done() and not g.cancelled()
                        and g.exception() is None]
    else:
        for c in chunks:
            try:
                results.append(run(c))
            except (Exception, KeyboardInterrupt) as e:
                failure = e
                break
    for start, (vecs, errs) in results:
        for j, v in enumerate(vecs):
            out[start + j] = v
        refused.extend((start + j, err) for j, err in errs)
    if client.lost != lost and not isinstance(failure, KeyboardInterrupt):
        changed = _another_space(session)
        if changed is not None:  # no answer of this call is known to be of the run's space: none is kept
            changed.partial = ([None] * len(texts), [])
            raise changed
    if failure is not None:
        failure.partial = (out, refused)
        raise failure
    return out, refused


def _another_space(session):
    """After a lost connection, the error saying the server now answers in another vector space than
    the run's (the fingerprint probe: Session.same_space_still), else None; a probe that cannot reach
    the server leaves the call's own outcome (None)."""
    from folio.embed import EndpointError, Failure

    try:
        session.same_space_still()
    except EndpointError as e:
        return e if e.kind == Failure.OTHER_MODEL else None
    return None


def _embed_chunk(client, target, texts, labels, top: bool = True):
    """Embed a request. When the server refuses it or answers it unusably, find the input at fault by
    bisecting instead of aborting the run — unless the server fails the fixed fingerprint probe
    alike, or fails every input, in which case the server is failing and the run stops. A server
    that takes fewer inputs a request lowers the target's batch size for the rest of the run."""
    from folio.embed import PROBE_TEXT, EndpointError, Failure

    try:
        mat = client.embed(texts, labels=labels, retry_errors=top)  # halves: the probe showed the server works
        return list(mat), []
    except EndpointError as e:
        if e.kind == Failure.TOO_MANY and len(texts) > 1:
            target.batch_size = max(1, len(texts) // 2)
        elif e.kind == Failure.TOO_LARGE:
            pass
        elif e.kind in (Failure.REFUSED, Failure.INVALID, Failure.OTHER_MODEL) and e.status not in (401, 403, 404):
            # Another dimension too: a server now serving another model answers the probe in it as well.
            if top:
                try:
                    client.embed([PROBE_TEXT])
                except EndpointError as dead:
                    raise ServerFailed(dead) from None
        else:
            raise
        if len(texts) == 1:  # the probe came back in the index's dimension: this one input's vector is at fault
            return [None], [(0, getattr(e, "odd", None) or e)]
        mid = len(texts) // 2
        a, ea = _embed_chunk(client, target, texts[:mid], labels[:mid], top=False)
        b, eb = _embed_chunk(client, target, texts[mid:], labels[mid:], top=False)
        if top and e.kind != Failure.TOO_LARGE and len(ea) + len(eb) == len(texts):
            raise ServerFailed(e) from None  # every input fails alike: the server, not one section
        return a + b, ea + [(mid + j, err) for j, err in eb]
