"""The ``throttle`` decorator: a function turned into one that obeys a
limit shared by the whole fleet."""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Optional, TypeVar

from ._client import Client, Seconds, _seconds, default_client
from ._errors import InvalidRequest

__all__ = ["throttle", "BLOCK", "SKIP"]

#: Wait for a permit (optimistic reservation: :meth:`Client.acquire`).
BLOCK = "block"
#: Skip the call, returning ``None``, when no permit is usable within
#: ``max_wait`` (pessimistic: :meth:`Client.try_acquire`).
SKIP = "skip"

F = TypeVar("F", bound=Callable[..., Any])


def throttle(
    limit: str,
    client: Optional[Client] = None,
    mode: str = BLOCK,
    max_wait: Seconds = 0.0,
    permits: int = 1,
    timeout: Optional[Seconds] = None,
) -> Callable[[F], F]:
    """Returns a decorator that makes a function obey ``limit``: every call
    first obtains ``permits`` permits of it from the register (or a
    sidecar) and runs the function only once they may be used::

        client = permitd.Client(servers=["10.0.0.1:8001", "10.0.0.2:8001", "10.0.0.3:8001"])

        @permitd.throttle("api", client=client)
        def call_api(item):
            return requests.post("https://api.example.com/v1/thing", json=item)

        @permitd.throttle("api", client=client, mode="skip", max_wait=0.5)
        async def maybe_call(item):   # None, without calling, when throttled
            ...

    It works on plain functions (the calling thread sleeps) and on
    ``async def`` functions (the task awaits; the event loop never blocks).
    A function counts as asynchronous when :func:`inspect.iscoroutinefunction`
    says so (an ``async def``, a :func:`functools.partial` of one, or one
    marked with ``inspect.markcoroutinefunction`` on Python >= 3.12), or
    when it is an object whose class has an ``async def __call__``. A plain
    function that returns an awaitable (a wrapper of an ``async def``) is
    not detected: the permit would be spent when the awaitable is made,
    not when it runs, so such a call raises :class:`TypeError`; decorate
    the ``async def`` itself, or make the wrapper ``async def``.

    Args:
        limit: the limit's name.
        client: the :class:`Client`; ``None`` uses
            :func:`permitd.default_client` (``PERMITD_SERVERS``), looked up
            at the first call.
        mode: ``"block"`` waits for a permit (:meth:`Client.acquire`: reserve
            ahead, sleep the wait, back off with jitter when refused) and
            raises :class:`Throttled` if ``timeout`` runs out; ``"skip"``
            reserves once with ``max_wait`` and, when refused, returns
            ``None`` without calling the function (:meth:`Client.try_acquire`).
        max_wait: (skip) the longest wait for a permit still accepted, in
            seconds; 0 takes only a permit usable now.
        permits: permits each call consumes. More than one on a strict limit
            raises :class:`SpacedGrant`: a strict limit's permits are never
            usable together.
        timeout: (block) the longest time a call waits for its permits;
            ``None`` waits as long as it takes.

    Errors other than a refusal (no server available, unknown limit, a bad
    token) are raised in both modes: the decorator fails closed.
    """
    if mode not in (BLOCK, SKIP):
        raise InvalidRequest("throttle mode %r; allowed: %r or %r" % (mode, BLOCK, SKIP))
    mw = _seconds(max_wait, "max_wait")
    if timeout is not None:
        _seconds(timeout, "timeout")
    if not isinstance(permits, int) or isinstance(permits, bool) or permits < 1:
        raise InvalidRequest("throttle permits %r; allowed: an integer >= 1" % (permits,))

    def decorate(fn: F) -> F:
        if _is_async(fn):

            @functools.wraps(fn)
            async def athrottled(*args: Any, **kwargs: Any) -> Any:
                c = client if client is not None else default_client()
                if mode == BLOCK:
                    await c.aacquire(limit, permits, timeout)
                elif await c.atry_acquire(limit, permits, mw) is None:
                    return None
                return await fn(*args, **kwargs)

            return athrottled  # type: ignore[return-value]

        @functools.wraps(fn)
        def throttled(*args: Any, **kwargs: Any) -> Any:
            c = client if client is not None else default_client()
            if mode == BLOCK:
                c.acquire(limit, permits, timeout)
            elif c.try_acquire(limit, permits, mw) is None:
                return None
            result = fn(*args, **kwargs)
            if inspect.isawaitable(result):
                close = getattr(result, "close", None)
                if inspect.iscoroutine(result) and close is not None:
                    close()  # never run: no "was never awaited" warning
                raise TypeError(
                    "permitd.throttle(%r): %s returned an awaitable, but it is not an async function, so its "
                    "permit was spent before the awaitable ran (it did not pace it); decorate an async def "
                    "(or mark the function with inspect.markcoroutinefunction on Python >= 3.12, or give its "
                    "class an async def __call__)" % (limit, getattr(fn, "__qualname__", repr(fn)))
                )
            return result

        return throttled  # type: ignore[return-value]

    return decorate


def _is_async(fn: Any) -> bool:
    """Whether calling fn makes a coroutine to await: an async def (or a
    partial of one, or one marked as such), or a callable object whose
    class's __call__ is an async def."""
    if inspect.iscoroutinefunction(fn):
        return True
    if isinstance(fn, functools.partial):
        return _is_async(fn.func)
    if inspect.isroutine(fn) or inspect.isclass(fn):
        return False
    call = getattr(type(fn), "__call__", None)
    return call is not None and inspect.iscoroutinefunction(call)
