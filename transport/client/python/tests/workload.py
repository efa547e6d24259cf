"""Callers of a throttled function, for the spacing tests: threads,
processes (started with multiprocessing's "spawn") and asyncio tasks.

Every caller records when its function body ran (the moment the permit is
used) on :func:`time.monotonic`, which on Linux is CLOCK_MONOTONIC, one
clock for every process of the machine, so uses from several processes can
be compared, together with the grant behind the use (its ready and expiry
instants and when the client last checked it unexpired, on the same
clock; see :class:`RecordingClient`). Every loop stops after ``max_calls``
calls or at ``end``, whichever comes first.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
import traceback
from typing import Any, Dict, List, Optional, Tuple

import harness  # noqa: F401  (puts src/ on sys.path)
import permitd

# (caller, used at, grant's ready_at, grant's expires_at (inf: none), grant's
# checked_at): one use of a permit.
Use = Tuple[str, float, float, float, float]

_grant: "contextvars.ContextVar[Optional[permitd.Grant]]" = contextvars.ContextVar("permitd_test_grant", default=None)


class RecordingClient(permitd.Client):
    """A Client whose acquire and aacquire remember their grant in the
    calling thread's (or asyncio task's) context, so that a function run by
    the throttle right after can record the grant behind its use."""

    def acquire(self, *args: Any, **kwargs: Any) -> permitd.Grant:
        g = super().acquire(*args, **kwargs)
        _grant.set(g)
        return g

    async def aacquire(self, *args: Any, **kwargs: Any) -> permitd.Grant:
        g = await super().aacquire(*args, **kwargs)
        _grant.set(g)
        return g


def record(who: str, g: Optional[permitd.Grant] = None) -> Use:
    """Reads the clock (the use) first, then describes the grant behind the
    use: g, or the one the caller's last acquire got (taken, so that a
    grant is never recorded twice)."""
    t = time.monotonic()
    if g is None:
        g = _grant.get()
        _grant.set(None)
    if g is None:
        raise AssertionError("%s: a use without a grant (not a RecordingClient?)" % who)
    exp = g.expires_at()
    chk = g.checked_at
    return (who, t, g.ready_at(), float("inf") if exp is None else exp, float("nan") if chk is None else chk)


def thread_callers(client: permitd.Client, limit: str, tag: str, n: int, end: float, max_calls: int) -> Tuple[List[Use], List[str]]:
    """Runs n threads calling a throttled function until end; returns the
    uses and the errors."""
    uses: List[Use] = []
    errors: List[str] = []
    expired: List[str] = []
    lock = threading.Lock()

    def caller(name: str) -> None:
        @permitd.throttle(limit, client=client, timeout=max(0.0, end - time.monotonic()))
        def use() -> None:
            u = record(name)
            with lock:
                uses.append(u)

        for _ in range(max_calls):
            if time.monotonic() >= end:
                return
            try:
                use()
            except permitd.Throttled:
                return  # the run's end came first
            except permitd.Expired:
                # The caller was descheduled past its permit's expiry
                # max_expired_rounds times in a row: the client refused to
                # use a late permit, as it must. Count it and go on.
                with lock:
                    expired.append(name)
                continue
            except Exception as e:  # noqa: BLE001
                with lock:
                    errors.append("%s: %r" % (name, e))
                return

    threads = [threading.Thread(target=caller, args=("%s-t%d" % (tag, i),)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(1.0, end - time.monotonic() + 15))
    return uses, errors


async def task_callers(client: permitd.Client, limit: str, tag: str, n: int, end: float, max_calls: int) -> Tuple[List[Use], List[str]]:
    """Runs n asyncio tasks calling a throttled ``async def`` until end."""
    uses: List[Use] = []
    errors: List[str] = []
    expired: List[str] = []

    async def caller(name: str) -> None:
        @permitd.throttle(limit, client=client, timeout=max(0.0, end - time.monotonic()))
        async def use() -> None:
            uses.append(record(name))

        for _ in range(max_calls):
            if time.monotonic() >= end:
                return
            try:
                await use()
            except permitd.Throttled:
                return
            except permitd.Expired:
                expired.append(name)
                continue
            except Exception as e:  # noqa: BLE001
                errors.append("%s: %r" % (name, e))
                return

    await asyncio.gather(*(caller("%s-a%d" % (tag, i)) for i in range(n)))
    return uses, errors


def loop_lag_probe(end: float, out: Dict[str, float]) -> "asyncio.Task[None]":
    """A task that measures how late the event loop runs a 5 ms sleep (a
    blocked loop shows as a large lag)."""

    async def probe() -> None:
        worst = 0.0
        while time.monotonic() < end:
            t = time.monotonic()
            await asyncio.sleep(0.005)
            worst = max(worst, time.monotonic() - t - 0.005)
        out["worst_lag"] = worst

    return asyncio.ensure_future(probe())


def process_main(servers: List[str], limit: str, tag: str, n_threads: int, duration: float, max_calls: int, ready: Any, start: Any, out: Any) -> None:
    """A child process: n_threads callers for duration seconds after the
    parent's start signal; puts (tag, uses, errors) on out."""
    try:
        client = RecordingClient(servers=servers)
        ready.put(tag)
        if not start.wait(30):
            out.put((tag, [], ["no start signal within 30 s"]))
            return
        end = time.monotonic() + duration
        uses, errors = thread_callers(client, limit, tag, n_threads, end, max_calls)
        out.put((tag, uses, errors))
    except Exception:  # noqa: BLE001
        out.put((tag, [], [traceback.format_exc()]))


def reserve_in_child(client: permitd.Client, limit: str, out: Any) -> None:
    """A forked child: one reserve and one asynchronous reserve on the
    parent's client; puts [granted, granted] (or the error) on out."""
    try:
        g1 = client.reserve(limit)
        g2 = asyncio.run(client.areserve(limit))
        out.put([g1.granted, g2.granted])
    except Exception:  # noqa: BLE001
        out.put(traceback.format_exc())
