"""A process that must end with its parent: folio index's walking child and its parse workers.

Owns the ways a child learns its parent is gone: on Linux the kernel's PR_SET_PDEATHSIG (set first
thing in a forked child, and between fork and exec for a spawned parse worker, so the kernel ends
it whether or not it ever gets a turn on a CPU), and everywhere a thread that watches the parent.
Must not import more than `os` at import time: folio.entry imports it (through readahead) before
it forks the walking child.
"""

from __future__ import annotations

import os


def die_with_parent(parent: int, watch: bool = True) -> None:
    """A worker (or the walking child) must not outlive its run. A run killed outright (kill -9, SIGTERM) never shuts
    its pool down, and a worker waiting on the pool's queue would wait forever: it holds the queue's
    write end itself, so the pipe never reports the parent gone. On Linux the kernel kills the worker
    with its parent (PR_SET_PDEATHSIG), whether or not it gets a turn on a CPU (a loaded machine, a
    stopped process); everywhere, a thread notices the parent is gone (the worker is handed to
    another parent) within a quarter of a second and ends the process (`watch`: start it)."""
    prctl = _prctl()
    if prctl is not None:
        prctl(_PR_SET_PDEATHSIG, _SIGKILL)
    if os.getppid() != parent:  # died before the line above took effect
        os._exit(1)
    if watch:
        watch_parent(parent, 0.25)


_PR_SET_PDEATHSIG, _SIGKILL = 1, 9
_prctl_fn: list = []


def before_fork() -> None:
    """Look prctl up in the parent, before it forks a child that calls die_with_parent: the child's
    first act is then the system call itself. Looked up in the child, the ctypes import (~3 ms of
    CPU, tens on a loaded machine) was a window in which a stopped or starved child outlived a
    killed run."""
    _prctl()


def _prctl():
    """libc's prctl(2) on Linux (through ctypes), else None; looked up once."""
    if not _prctl_fn:
        import sys

        fn = None
        if sys.platform.startswith("linux"):
            try:
                import ctypes

                fn = ctypes.CDLL(None, use_errno=True).prctl
            except (OSError, AttributeError):
                fn = None  # the watching thread still ends the process
        _prctl_fn.append(fn)
    return _prctl_fn[0]


_spawned: list = []  # the worker processes _spawn_dying started (their Popen kept: see there)


def _spawn_dying(path, args, passfds, plain=None):
    """multiprocessing.util.spawnv_passfds (fork, then exec a new interpreter) for the parse pool, with
    PR_SET_PDEATHSIG set between the fork and the exec of a worker: the kernel ends the worker with
    its run even while its interpreter is still starting (which takes seconds on a loaded machine,
    before _worker_init runs a line). Other command lines (multiprocessing's resource tracker, which
    ends by itself once the run and its workers are gone, after removing what they left) go to
    `plain`. The Popen objects are kept so subprocess never reaps a pid multiprocessing waits for."""
    if not any((b"spawn_main" if isinstance(a, bytes) else "spawn_main") in a for a in args):
        return plain(path, args, passfds)
    import subprocess

    parent, prctl = os.getpid(), _prctl()

    def before_exec() -> None:
        prctl(_PR_SET_PDEATHSIG, _SIGKILL)
        if os.getppid() != parent:
            os._exit(1)

    p = subprocess.Popen(args, executable=path, pass_fds=tuple(sorted(map(int, passfds))), close_fds=True,
                         restore_signals=False, preexec_fn=before_exec)
    _spawned.append(p)
    return p.pid


def workers_die_with_us() -> None:
    """Start the parse pool's workers through _spawn_dying (Linux; once per process)."""
    import multiprocessing.util as mputil

    if _prctl() is None or getattr(mputil.spawnv_passfds, "func", None) is _spawn_dying:
        return
    import functools

    mputil.spawnv_passfds = functools.partial(_spawn_dying, plain=mputil.spawnv_passfds)


def watch_parent(parent: int, every: float) -> None:
    """A thread that ends this process once `parent` is gone (it was handed to another parent), checked
    every `every` seconds. `_thread`, not threading: the walking child starts it first thing, and
    importing threading costs more than the walk of a small tree."""
    import _thread

    def watch() -> None:
        import time

        while os.getppid() == parent:
            time.sleep(every)
        os._exit(1)

    _thread.start_new_thread(watch, ())
