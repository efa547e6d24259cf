"""The permitd :class:`Client`: reserves, blocking and asynchronous
acquires, and the register's limit administration."""

from __future__ import annotations

import asyncio
import collections.abc
import concurrent.futures
import datetime
import functools
import json
import os
import re
import secrets
import ssl
import threading
import time
import weakref
from typing import Any, AsyncIterator, Callable, Dict, Generator, Iterable, Iterator, List, Optional, Tuple, Union
from urllib.parse import quote

from ._errors import Expired, InvalidRequest, PermitdError, SpacedGrant, Throttled, error_for
from ._grant import Grant
from ._http import DeadlineReached, Response, Transport, _asleep, _sleep, parse_server
from ._reservation import Reservation, SettledLimit, Settlement

__all__ = ["Client", "PendingReservation", "default_client", "set_default_client"]

Seconds = Union[int, float, datetime.timedelta]

#: Defaults of the client's options (seconds, counts).
DEFAULT_TIMEOUT = 5.0
DEFAULT_ROUNDS = 3
DEFAULT_BACKOFF_BASE = 0.025
DEFAULT_BACKOFF_MAX = 2.0
DEFAULT_MAX_WAIT = 10.0
DEFAULT_EXPIRED_ROUNDS = 4

# The shortest backoff after a refusal, so that a refusal with a tiny
# retry_after never turns into a hot loop.
_MIN_REFUSAL_BACKOFF = 0.001

# A sidecar's answer to a max_wait above its --max-reserve-wait
# (transport/sidecar/sidecar.go): `field "max_wait": 10s; allowed on this
# worker sidecar: at most 2s`.
_SIDECAR_CAP = re.compile(r'allowed on this worker sidecar: at most ([0-9][0-9.a-zµμ]*)\s*$')

_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_GO_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")


def parse_go_duration(text: str) -> Optional[float]:
    """Seconds of a Go duration string as Go's Duration.String writes it
    ("2s", "1m30s", "1.5s", "250ms", "0s"), or None when it is not one."""
    if text == "0":
        return 0.0
    pos, total = 0, 0.0
    while pos < len(text):
        m = _GO_PART.match(text, pos)
        if m is None:
            return None
        total += float(m.group(1)) * _GO_UNITS[m.group(2)]
        pos = m.end()
    return total if pos > 0 else None

_REQUEST_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
_LIMIT_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
_RESERVATION_ID = re.compile(r"^[1-9][0-9]{0,19}$")

#: The most limits one reserve_many may name (and one settlement).
MAX_RESERVE_LIMITS = 8


def _seconds(v: Any, what: str) -> float:
    """A duration given in seconds (int, float) or as a timedelta, >= 0."""
    if isinstance(v, datetime.timedelta):
        s = v.total_seconds()
    elif isinstance(v, (int, float)) and not isinstance(v, bool):
        s = float(v)
    else:
        raise InvalidRequest("%s %r; allowed: seconds (int or float) or a datetime.timedelta, >= 0" % (what, v))
    if not s >= 0 or s == float("inf"):
        raise InvalidRequest("%s %r; allowed: a finite duration >= 0" % (what, v))
    return s


def _go_duration(v: Any, what: str) -> str:
    """A duration for the register's JSON: Go duration strings pass through,
    seconds and timedeltas become whole nanoseconds ("1500000000ns")."""
    if isinstance(v, str):
        return v
    return "%dns" % int(_seconds(v, what) * 1e9)


def _limit_body(algorithm: str, rate: Optional[float], per: Any, options: Dict[str, Any]) -> Dict[str, Any]:
    """The body of PUT /v1/limits/{name} (and a template's configuration):
    durations as Go duration strings."""
    body: Dict[str, Any] = {"algorithm": algorithm}
    if rate is not None:
        body["rate"] = rate
    if per is not None:
        body["per"] = _go_duration(per, "per")
    for k, v in options.items():
        body[k] = _go_duration(v, k) if k in ("expiry", "warmup", "ttl") else v
    return body


def _decision(r: Response, what: str, rid: str) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """The JSON body of a reserve's answer r (a 200 or a 429) and what a
    Grant and a Reservation take from it alike, as their keyword arguments:
    granted and duplicate; wait and spacing of a grant, retry_after and error
    of a refusal; the request ID rid, r's times and its server."""
    a = r.json()
    if "granted" not in a:
        raise PermitdError(
            "%s: cannot decode the answer" % what,
            error=r.body[:200].decode("utf-8", "replace"),
            status=r.status,
            server=r.server,
        )
    granted = r.status == 200 and a.get("granted") is True
    decided: Dict[str, Any] = {
        "granted": granted,
        "duplicate": a.get("duplicate") is True,
        "request_id": rid,
        "sent_at": r.sent_at,
        "received_at": r.received_at,
        "server": r.server,
    }
    if granted:
        decided["wait"] = max(0, _ns(a.get("wait_ns"))) / 1e9
        decided["spacing"] = max(0, _ns(a.get("spacing_ns"))) / 1e9
    else:
        ra = r.retry_after()
        decided["retry_after"] = ra if ra is not None else 0.0
        err = a.get("error")
        decided["error"] = err if isinstance(err, str) else None
        decided["keys_full"] = a.get("keys_full") is True
    return a, decided


def _ns(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


class Client:
    """A client of a permitd register (its agents) or of a worker sidecar.

    It is safe to share between threads and asyncio tasks, and may be used
    in processes forked after it was made (each process opens its own
    connections).

    Args:
        servers: the servers' addresses, "host:port" (or "http://host:port",
            "https://host:port"), as a list or a comma-separated string. The
            client fails over between them.
        token: an API token (a secret from ``permitd tokens create``), sent
            as ``Authorization: Bearer``. ``None`` reads ``PERMITD_TOKEN``;
            ``""`` sends none.
        ca_file: the CA certificate (PEM) to verify the servers with; the
            servers are then reached over HTTPS.
        cert_file, key_file: a client certificate and its key (PEM), for
            agents run with ``--client-cert-auth``.
        timeout: seconds one attempt against one server may take to connect,
            and then to answer (plus the reserve's ``max_wait``, which a
            sidecar spends before it answers). A timed-out attempt moves to
            the next server. An acquire's own ``timeout`` bounds its
            attempts too.
        ssl_context: an :class:`ssl.SSLContext` to use instead of
            ``ca_file``/``cert_file``/``key_file``.
        rounds: how many times one request may go round all servers before
            :class:`Unavailable` is raised.
        backoff_base, backoff_max: the full-jitter backoff between rounds of
            failed attempts: the k-th is uniform in
            ``[0, min(backoff_max, backoff_base * 2**k)]``. (After a
            refusal an acquire waits its ``retry_after`` plus a jitter of
            at most ``min(backoff_base, retry_after / 4)``.)
        default_max_wait: the ``max_wait`` of :meth:`acquire` without a
            timeout.
        max_expired_rounds: how many permits in a row may expire before use
            (the caller overslept) until an acquire raises :class:`Expired`:
            it reserves again at most ``max_expired_rounds - 1`` times.
        async_workers: threads that run the blocking HTTP calls of the
            asynchronous methods.
        seed: seeds the jitter, for reproducible runs.
    """

    def __init__(
        self,
        servers: Union[str, Iterable[str]],
        token: Optional[str] = None,
        ca_file: Optional[str] = None,
        cert_file: Optional[str] = None,
        key_file: Optional[str] = None,
        timeout: Seconds = DEFAULT_TIMEOUT,
        *,
        ssl_context: Optional[ssl.SSLContext] = None,
        rounds: int = DEFAULT_ROUNDS,
        backoff_base: Seconds = DEFAULT_BACKOFF_BASE,
        backoff_max: Seconds = DEFAULT_BACKOFF_MAX,
        default_max_wait: Seconds = DEFAULT_MAX_WAIT,
        max_expired_rounds: int = DEFAULT_EXPIRED_ROUNDS,
        async_workers: int = 32,
        seed: Optional[int] = None,
    ) -> None:
        if isinstance(servers, str):
            servers = [s.strip() for s in servers.split(",") if s.strip()]
        servers = list(servers)
        if not servers:
            raise InvalidRequest("no servers given; allowed: one or more \"host:port\"")
        if key_file and not cert_file:
            raise InvalidRequest("key_file without cert_file; give both, or neither")
        if ssl_context is None and (ca_file or cert_file):
            ssl_context = ssl.create_default_context(cafile=ca_file)
            if cert_file:
                ssl_context.load_cert_chain(cert_file, key_file)
        tls = ssl_context is not None
        parsed = [parse_server(s, tls) for s in servers]
        if token is None:
            token = os.environ.get("PERMITD_TOKEN") or None
        if token is not None and (any(c in token for c in "\r\n") or not token.isprintable()):
            raise InvalidRequest("token contains control characters")
        self.timeout = _seconds(timeout, "timeout")
        if self.timeout <= 0:
            raise InvalidRequest("timeout %r; allowed: > 0" % (timeout,))
        base = _seconds(backoff_base, "backoff_base")
        bmax = _seconds(backoff_max, "backoff_max")
        if not 0 < base <= bmax:
            raise InvalidRequest("backoff base %r, max %r; allowed: 0 < base <= max" % (backoff_base, backoff_max))
        if not isinstance(rounds, int) or rounds < 1:
            raise InvalidRequest("rounds %r; allowed: an integer >= 1" % (rounds,))
        if not isinstance(max_expired_rounds, int) or max_expired_rounds < 1:
            raise InvalidRequest("max_expired_rounds %r; allowed: an integer >= 1" % (max_expired_rounds,))
        self.default_max_wait = _seconds(default_max_wait, "default_max_wait")
        self.max_expired_rounds = max_expired_rounds
        self._async_workers = max(1, int(async_workers))
        self._executor: Optional[concurrent.futures.ThreadPoolExecutor] = None
        self._executor_pid = 0
        self._executor_lock = threading.Lock()
        # The --max-reserve-wait of sidecars that refused a longer max_wait,
        # by server base URL (see _reserve).
        self._max_wait_caps: Dict[str, float] = {}
        self._t = Transport(
            parsed,
            ssl_context=ssl_context,
            token=token,
            rounds=rounds,
            backoff_base=base,
            backoff_max=bmax,
            seed=seed,
        )
        _clients.add(self)

    # -- lifecycle --------------------------------------------------------

    @property
    def servers(self) -> List[str]:
        """The servers' base URLs, in failover order."""
        return [s.base for s in self._t.servers]

    def close(self) -> None:
        """Closes idle connections and the asynchronous methods' threads.
        The client stays usable: later calls open new ones."""
        self._t.close()
        with self._executor_lock:
            ex, self._executor = self._executor, None
        if ex is not None:
            ex.shutdown(wait=False)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return "Client(servers=%r)" % (self.servers,)

    def _after_fork(self) -> None:
        """In a forked child: fresh locks, no executor, no connections."""
        self._executor_lock = threading.Lock()
        self._executor = None
        self._t._check_fork()

    def _run_async(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> "asyncio.Future[Any]":
        """Runs a blocking call in the client's threads, for the event loop
        to await."""
        with self._executor_lock:
            # A forked child inherits the executor but not its threads:
            # it makes its own.
            if self._executor is None or self._executor_pid != os.getpid():
                self._executor = concurrent.futures.ThreadPoolExecutor(
                    max_workers=self._async_workers, thread_name_prefix="permitd-client"
                )
                self._executor_pid = os.getpid()
            ex = self._executor
        loop = asyncio.get_running_loop()
        return loop.run_in_executor(ex, functools.partial(fn, *args, **kwargs))

    # -- reserve ----------------------------------------------------------

    def reserve(
        self,
        limit: str,
        permits: int = 1,
        max_wait: Seconds = 0.0,
        *,
        request_id: Optional[str] = None,
        deadline: Optional[float] = None,
    ) -> Grant:
        """Asks for ``permits`` permits of ``limit`` usable within
        ``max_wait`` seconds, once; never sleeps for them.

        A refusal is not an exception: it returns a :class:`Grant` with
        ``granted`` False and ``retry_after``. The reserve carries a request
        ID (16 random bytes in hex, or ``request_id``) that stays the same
        when a timeout, a broken connection or a 503 makes the client send it
        again (to the next server): the register answers such a retry with
        its first decision (``duplicate`` True), never deciding twice.

        Args:
            deadline: a :func:`time.monotonic` instant that bounds the
                call: no attempt or failover backoff starts after it, and
                no attempt lasts past it.

        Raises:
            Throttled: the ``deadline`` came before a server answered (the
                exception's ``__cause__`` says what failed).
            NotFound: no such limit (or not the sidecar's).
            InvalidRequest: bad arguments (checked before sending), or the
                server's refusal of them (such as a leased limit, or a
                ``max_wait`` above a sidecar's ``--max-reserve-wait``).
            Unavailable: no server answered within the bounded attempts.
            Unauthorized, Forbidden: the token is missing, unknown or lacks
                the right.
        """
        try:
            return self._reserve(limit, permits, max_wait, request_id, deadline, False)
        except DeadlineReached as e:
            raise Throttled(
                "reserve on %r: the deadline came before a server answered; last failure: %s" % (limit, e.last_failure),
                limit=limit,
            ) from e

    def _reserve(
        self,
        limit: str,
        permits: int,
        max_wait: Seconds,
        request_id: Optional[str],
        deadline: Optional[float],
        capped: bool,
    ) -> Grant:
        """reserve; raises DeadlineReached. ``capped``: the client chose
        ``max_wait`` itself (an acquire), so it may lower it to a sidecar's
        ``--max-reserve-wait``: a 400 that names that cap is remembered for
        that server, and the reserve is sent again once with the cap."""
        if not isinstance(permits, int) or isinstance(permits, bool) or permits < 1:
            raise InvalidRequest("reserve %r permits of %r; allowed: an integer >= 1" % (permits, limit))
        mw = _seconds(max_wait, "max_wait")
        if not isinstance(limit, str) or not limit:
            raise InvalidRequest("limit name %r; allowed: 1-128 characters of [A-Za-z0-9_.:-]" % (limit,))
        if request_id is None:
            rid = secrets.token_hex(16)
        elif isinstance(request_id, str) and _REQUEST_ID.match(request_id):
            rid = request_id
        else:
            raise InvalidRequest("request_id %r; allowed: 1-64 characters of A-Z a-z 0-9 _ . : -" % (request_id,))
        rid_b = rid.encode("ascii")

        def body(w: float) -> bytes:
            return b'{"permits":%d,"max_wait":"%dns","request_id":"%s"}' % (permits, int(w * 1e9), rid_b)

        caps = self._max_wait_caps
        body_for = None
        if capped:
            servers = self._t.servers

            def body_for(i: int) -> bytes:
                return body(min(mw, caps.get(servers[i].base, mw)))

        path = "/v1/limits/" + quote(limit, safe="") + "/reserve"
        for again in (False, True):
            r = self._t.send(
                "POST",
                path,
                body(mw),
                what="reserve on %r" % limit,
                timeout=self.timeout + mw,
                connect_timeout=self.timeout,
                deadline=deadline,
                body_for=body_for,
            )
            if capped and not again and r.status == 400:
                m = _SIDECAR_CAP.search(r.error_text())
                cap = parse_go_duration(m.group(1)) if m else None
                if cap is not None and cap < caps.get(r.server, mw):
                    # A sidecar with a smaller --max-reserve-wait: ask it
                    # for at most that from now on (a 400 decided nothing,
                    # so the request ID may be sent again).
                    caps[r.server] = cap
                    continue
            break
        return self._grant(r, limit, permits, rid)

    def _grant(self, r: Response, limit: str, permits: int, rid: str) -> Grant:
        if r.status not in (200, 429):
            if r.status == 410:
                raise PermitdError(
                    "reserve on %r: the server answered that a session expired, but this client sends request IDs" % limit,
                    error=r.error_text(),
                    status=r.status,
                    server=r.server,
                )
            raise error_for(r.status, r.error_text(), r.server, "reserve on %r" % limit)
        a, decided = _decision(r, "reserve on %r" % limit, rid)
        g = Grant(limit=limit, permits=permits, **decided)
        if g.granted:
            e = _ns(a.get("expires_in_ns"))
            g.expires_in = None if e == 0 else e / 1e9
        return g

    async def areserve(
        self,
        limit: str,
        permits: int = 1,
        max_wait: Seconds = 0.0,
        *,
        request_id: Optional[str] = None,
        deadline: Optional[float] = None,
    ) -> Grant:
        """:meth:`reserve` for asyncio: the HTTP exchange runs in the
        client's threads, so the event loop is never blocked."""
        return await self._run_async(self.reserve, limit, permits, max_wait, request_id=request_id, deadline=deadline)

    # -- reservations: several limits at once, settled afterwards ----------

    @staticmethod
    def _parts(parts: Any, what: str, min_permits: int) -> List[Dict[str, Any]]:
        """Validates limits/actual given as a mapping or as (name, permits)
        pairs: at most 8, each limit once, integer permits >= min_permits."""
        if isinstance(parts, collections.abc.Mapping):
            items = list(parts.items())
        elif isinstance(parts, (list, tuple)):
            items = list(parts)
        else:
            raise InvalidRequest("%s %r; allowed: a dict {limit: permits} or a list of (limit, permits) pairs" % (what, parts))
        if len(items) > MAX_RESERVE_LIMITS:
            raise InvalidRequest("%s: %d limits; allowed: at most %d" % (what, len(items), MAX_RESERVE_LIMITS))
        out: List[Dict[str, Any]] = []
        seen = set()
        for item in items:
            if not isinstance(item, (list, tuple)) or len(item) != 2:
                raise InvalidRequest("%s entry %r; allowed: a (limit, permits) pair" % (what, item))
            name, n = item
            if not isinstance(name, str) or not _LIMIT_NAME.match(name):
                raise InvalidRequest("%s: limit name %r; allowed: 1-128 characters of [A-Za-z0-9_.:-]" % (what, name))
            if not isinstance(n, int) or isinstance(n, bool) or n < min_permits:
                raise InvalidRequest("%s: %r permits of %r; allowed: an integer >= %d" % (what, n, name, min_permits))
            if name in seen:
                raise InvalidRequest("%s: limit %r is listed twice; allowed: each limit once" % (what, name))
            seen.add(name)
            out.append({"name": name, "permits": n})
        return out

    @staticmethod
    def _reservation_path(reservation_id: Any, op: str) -> Tuple[str, str]:
        rid = str(reservation_id) if isinstance(reservation_id, int) and not isinstance(reservation_id, bool) else reservation_id
        if not isinstance(rid, str) or not _RESERVATION_ID.match(rid):
            raise InvalidRequest("reservation id %r; allowed: the reservation_id a grant returned, a decimal integer >= 1" % (reservation_id,))
        return rid, "/v1/reservations/%s/%s" % (rid, op)

    @staticmethod
    def _request_id(request_id: Optional[str]) -> str:
        if request_id is None:
            return secrets.token_hex(16)
        if isinstance(request_id, str) and _REQUEST_ID.match(request_id):
            return request_id
        raise InvalidRequest("request_id %r; allowed: 1-64 characters of A-Z a-z 0-9 _ . : -" % (request_id,))

    def reserve_many(
        self,
        limits: Union[Dict[str, int], List[Tuple[str, int]]],
        max_wait: Seconds = 0.0,
        settle_within: Optional[Union[str, Seconds]] = None,
        timeout: Optional[Seconds] = None,
        *,
        request_id: Optional[str] = None,
    ) -> Reservation:
        """Reserves permits of several limits in one decision
        (``POST /v1/reserve``): every limit grants its part at one time,
        within ``max_wait`` seconds, or none does. Never sleeps for them,
        but a reserve that names an in-flight cap whose permits are all
        held waits in the cap's queue on the server, up to ``max_wait``,
        for a release or a lapse that frees them: the answer comes when it
        is granted (or refused at its deadline), so each attempt may take
        the client's ``timeout`` plus ``max_wait``, and a retry keeps its
        place in the queue (the same request ID).

        ``limits`` maps 1 to 8 limit names to their permits (``{"rpm": 1,
        "tpm": 4000}``), or lists ``(name, permits)`` pairs; a strict
        limit takes 1 permit in a reserve of several limits. A limit may be
        a concurrency limit (an in-flight cap: its permits are held until
        :meth:`release`, a settlement that uses fewer, or its TTL), or in
        shadow mode (counted, never waited for).

        A refusal is not an exception: the :class:`Reservation` has
        ``granted`` False, ``retry_after`` and ``blocking``, the limit
        that blocked; no limit reserved anything. A grant has a
        ``reservation_id``: report the real cost with :meth:`settle`
        within ``settle_within`` (seconds or a Go duration string; default
        the server's, one minute; at most ten minutes), and free in-flight
        permits with :meth:`release`. Use the grant at
        :meth:`Grant.ready_at`, or as a context manager (see
        :class:`Reservation`).

        The reserve carries a request ID (16 random bytes in hex, or
        ``request_id``) that stays the same when a timeout, a broken
        connection or a 503 makes the client send it again, to the same or
        the next server: the register answers such a retry with its first
        decision (``duplicate`` True), the same reservation.

        Args:
            timeout: seconds that bound the call, failovers included (as
                :meth:`reserve`'s ``deadline``); ``None``: only the
                client's rounds bound it.

        Raises:
            Throttled: ``timeout`` ran out before a server answered.
            NotFound: no such limit.
            InvalidRequest: bad arguments (checked before sending), or the
                server's refusal of them (a leased limit, more permits
                than a limit grants at once, several permits of a strict
                limit among several limits).
            Unavailable, Unauthorized, Forbidden: as :meth:`reserve`.
        """
        parts = self._parts(limits, "reserve_many", 1)
        if not parts:
            raise InvalidRequest("reserve_many: no limits; allowed: 1 to %d" % MAX_RESERVE_LIMITS)
        mw = _seconds(max_wait, "max_wait")
        payload: Dict[str, Any] = {"limits": parts, "max_wait": "%dns" % int(mw * 1e9)}
        rid = self._request_id(request_id)
        payload["request_id"] = rid
        if settle_within is not None:
            if not isinstance(settle_within, str) and _seconds(settle_within, "settle_within") <= 0:
                raise InvalidRequest("settle_within %r; allowed: > 0, at most 10 minutes" % (settle_within,))
            payload["settle_within"] = _go_duration(settle_within, "settle_within")
        deadline = self._deadline(timeout)
        names = [p["name"] for p in parts]
        what = "reserve of %s" % ", ".join(repr(n) for n in names)
        try:
            r = self._t.send(
                "POST",
                "/v1/reserve",
                json.dumps(payload, separators=(",", ":")).encode("utf-8"),
                what=what,
                timeout=self.timeout + mw,
                connect_timeout=self.timeout,
                deadline=deadline,
            )
        except DeadlineReached as e:
            raise Throttled(
                "%s: the timeout came before a server answered; last failure: %s" % (what, e.last_failure),
                limit=",".join(names),
            ) from e
        if r.status not in (200, 429):
            raise error_for(r.status, r.error_text(), r.server, what)
        a, decided = _decision(r, what, rid)
        g = Reservation(limits={p["name"]: p["permits"] for p in parts}, client=self, **decided)
        if g.granted:
            e = _ns(a.get("expires_in_ns"))
            # The server held the request held_ns (a reserve that waited in
            # an in-flight cap's queue): the expiry counts from the answer's
            # departure, at least that long after sent_at (capped at the
            # round trip).
            held = min(max(0, _ns(a.get("held_ns"))) / 1e9, max(0.0, r.received_at - r.sent_at))
            g.expires_in = None if e == 0 else e / 1e9 if e < 0 else e / 1e9 + held
            res_id = a.get("reservation_id")
            g.reservation_id = res_id if isinstance(res_id, str) else str(res_id) if isinstance(res_id, int) else ""
            # A server that does not say holds is asked to release anyway.
            g.holds = a.get("holds") is not False
            # The hold's end counts from the answer's departure like the
            # expiry; a server that does not say it: the expiry, which is
            # never later.
            h = _ns(a.get("hold_expires_in_ns")) if "hold_expires_in_ns" in a else e
            g.hold_expires_in = None if not g.holds or h == 0 else h / 1e9 if h < 0 else h / 1e9 + held
        else:
            b = a.get("blocking")
            g.blocking = b if isinstance(b, str) and b else None
        return g

    def areserve_many(
        self,
        limits: Union[Dict[str, int], List[Tuple[str, int]]],
        max_wait: Seconds = 0.0,
        settle_within: Optional[Union[str, Seconds]] = None,
        timeout: Optional[Seconds] = None,
        *,
        request_id: Optional[str] = None,
    ) -> "PendingReservation":
        """:meth:`reserve_many` for asyncio: the HTTP exchange runs in the
        client's threads. Await it for the :class:`Reservation`, or use it
        directly with ``async with``::

            r = await client.areserve_many({"rpm": 1, "tpm": 4000})

            async with client.areserve_many({"rpm": 1, "tpm": 4000}, max_wait=2) as r:
                used = await call_model()
                await r.asettle(tpm=used)
        """
        return PendingReservation(self, limits, max_wait, settle_within, timeout, request_id)

    def settle(
        self,
        reservation_id: Union[str, int],
        actual: Optional[Union[Dict[str, int], List[Tuple[str, int]]]] = None,
        *,
        request_id: Optional[str] = None,
        timeout: Optional[Seconds] = None,
    ) -> Settlement:
        """Reports the permits actually used per limit of a reservation
        (``POST /v1/reservations/{id}/settle``); a limit not named used
        what it reserved (so ``actual`` may be empty). Per limit, unused
        permits of a rate limit go back if nothing else touched the limit
        since the grant, or, on a bursty limit, as far as its burst allows
        (a later reserve can then be granted earlier),
        unused in-flight permits are released, and an overrun of a rate
        limit is charged as debt (delaying later grants); shadow limits
        change nothing.

        The settlement carries a request ID (16 random bytes in hex, or
        ``request_id``) kept across the client's retries, so it is applied
        once: a retry gets the first result (``duplicate`` True).

        Raises:
            NotFound: no such reservation, or one already final (its settle
                window and holds are over).
            Conflict: the reservation was settled already, by another
                request ID.
            Forbidden: the reservation belongs to another token.
            InvalidRequest: a limit the reservation does not hold, an
                overrun of an in-flight cap, bad arguments.
            Unavailable, Unauthorized: as :meth:`reserve` (``timeout``
                bounds the call, failovers included).
        """
        rid, path = self._reservation_path(reservation_id, "settle")
        parts = self._parts([] if actual is None else actual, "settle", 0)
        req_id = self._request_id(request_id)
        a, server = self._call_from("POST", path, {"actual": parts, "request_id": req_id}, self._deadline(timeout))
        limits: Dict[str, SettledLimit] = {}
        for x in a.get("limits") or []:
            if isinstance(x, dict) and isinstance(x.get("name"), str):
                limits[x["name"]] = SettledLimit(
                    x["name"], _ns(x.get("reserved")), _ns(x.get("actual")), _ns(x.get("refunded")), _ns(x.get("charged"))
                )
        return Settlement(rid, a.get("duplicate") is True, limits, req_id, server)

    async def asettle(
        self,
        reservation_id: Union[str, int],
        actual: Optional[Union[Dict[str, int], List[Tuple[str, int]]]] = None,
        *,
        request_id: Optional[str] = None,
        timeout: Optional[Seconds] = None,
    ) -> Settlement:
        """:meth:`settle` for asyncio."""
        return await self._run_async(self.settle, reservation_id, actual, request_id=request_id, timeout=timeout)

    def release(self, reservation_id: Union[str, int], *, timeout: Optional[Seconds] = None) -> int:
        """Frees the in-flight permits a reservation holds (its concurrency
        limits; rate limits are untouched) and returns how many it freed
        (``POST /v1/reservations/{id}/release``): 0 for a second release,
        a hold that already expired, or a reservation of rate limits only.
        Releasing is idempotent, so the client's retries are safe.

        Raises:
            NotFound: no such reservation, or one already final.
            Forbidden: the reservation belongs to another token.
            InvalidRequest, Unavailable, Unauthorized: as :meth:`settle`.
        """
        _, path = self._reservation_path(reservation_id, "release")
        a = self._call("POST", path, {}, deadline=self._deadline(timeout))
        return _ns(a.get("released"))

    async def arelease(self, reservation_id: Union[str, int], *, timeout: Optional[Seconds] = None) -> int:
        """:meth:`release` for asyncio."""
        return await self._run_async(self.release, reservation_id, timeout=timeout)

    # -- acquire ----------------------------------------------------------

    def _deadline(self, timeout: Optional[Seconds]) -> Optional[float]:
        return None if timeout is None else time.monotonic() + _seconds(timeout, "timeout")

    def _max_wait(self, limit: str, permits: int, deadline: Optional[float], last: Optional[Grant]) -> float:
        # Never more than default_max_wait, even with a longer timeout: a
        # sidecar refuses a max_wait above its --max-reserve-wait (10 s by
        # default), and a refusal is simply asked again.
        if deadline is None:
            return self.default_max_wait
        left = deadline - time.monotonic()
        if left <= 0:
            raise self._timed_out(limit, permits, last)
        return min(left, self.default_max_wait)

    def _refusal_backoff(self, k: int, g: Grant, deadline: Optional[float]) -> float:
        """How long to sleep after refusal g before reserving again: until
        its ``retry_after`` (counted from the answer's receipt) plus a
        small jitter, never less, so that the next reserve (a new request
        ID from the register's table) can be granted. Without a
        ``retry_after``, the full-jitter backoff. Raises Throttled at once
        when ``retry_after`` ends after the deadline."""
        ra = g.retry_after
        if ra > 0:
            at = g.received_at + ra
            if deadline is not None and at >= deadline:
                raise self._timed_out(g.limit, g.permits, g)
            wake = at + self._t.uniform(min(self._t.backoff_base, ra / 4))
            if deadline is not None and wake >= deadline:
                wake = at
            return max(wake - time.monotonic(), _MIN_REFUSAL_BACKOFF)
        d = max(self._t.backoff(k), _MIN_REFUSAL_BACKOFF)
        if deadline is not None and time.monotonic() + d >= deadline:
            raise self._timed_out(g.limit, g.permits, g)
        return d

    @staticmethod
    def _timed_out(limit: str, permits: int, last: Optional[Grant], cause: Optional[DeadlineReached] = None) -> Throttled:
        why = ""
        if cause is not None:
            why = "; last failure: %s" % cause.last_failure
        return Throttled(
            "limit %r: no %s within the timeout%s" % (limit, "permit" if permits == 1 else "%d permits" % permits, why),
            limit=limit,
            retry_after=None if last is None else last.retry_after,
            error=None if last is None else last.error,
            status=None if last is None else 429,
            server=None if last is None else last.server,
            keys_full=last is not None and last.keys_full,
        )

    def _acquire_grant(self, limit: str, permits: int, deadline: Optional[float]) -> Grant:
        last: Optional[Grant] = None
        for k in range(1 << 62):
            mw = self._max_wait(limit, permits, deadline, last)
            try:
                g = self._reserve(limit, permits, mw, None, deadline, True)
            except DeadlineReached as e:
                raise self._timed_out(limit, permits, last, e) from e
            if g.granted:
                return g
            last = g
            _sleep(self._refusal_backoff(k, g, deadline))
        raise AssertionError("unreachable")

    async def _aacquire_grant(self, limit: str, permits: int, deadline: Optional[float]) -> Grant:
        last: Optional[Grant] = None
        for k in range(1 << 62):
            mw = self._max_wait(limit, permits, deadline, last)
            try:
                g = await self._run_async(self._reserve, limit, permits, mw, None, deadline, True)
            except DeadlineReached as e:
                raise self._timed_out(limit, permits, last, e) from e
            if g.granted:
                return g
            last = g
            await _asleep(self._refusal_backoff(k, g, deadline))
        raise AssertionError("unreachable")

    def _spaced(self, g: Grant) -> SpacedGrant:
        return SpacedGrant(
            "limit %r: %d permits granted %.6fs apart cannot be used together (they are forfeited); use acquire_each"
            % (g.limit, g.permits, g.spacing)
        )

    def acquire(self, limit: str, permits: int = 1, timeout: Optional[Seconds] = None) -> Grant:
        """Blocks until ``permits`` permits of ``limit`` may be used together,
        and returns their grant: use them right after it returns.

        It reserves with ``max_wait`` = the time left until the timeout (at
        most ``default_max_wait``, and at most the ``--max-reserve-wait``
        of a sidecar that refused more), then sleeps the granted wait. When
        refused it sleeps the server's ``retry_after`` plus a small jitter
        and reserves again (a new request), until the timeout; when the
        ``retry_after`` ends after the timeout it raises at once. When the
        caller overslept the permit's expiry (a busy machine), it reserves
        again; after ``max_expired_rounds`` expired permits in a row it
        raises :class:`Expired`.

        The timeout bounds everything, failing servers included: no attempt
        outlasts it.

        Raises:
            Throttled: the timeout ran out (refused until then, or no
                server answered in time).
            SpacedGrant: ``permits`` > 1 on a strict limit, whose permits are
                never usable together (see :meth:`acquire_each`).
            Expired: ``max_expired_rounds`` permits in a row expired before
                use.
            NotFound, InvalidRequest, Unavailable, Unauthorized, Forbidden:
                as :meth:`reserve`.
        """
        deadline = self._deadline(timeout)
        for rnd in range(self.max_expired_rounds):
            g = self._acquire_grant(limit, permits, deadline)
            if g.spaced:
                raise self._spaced(g)
            try:
                g.sleep()
                return g
            except Expired:
                if rnd + 1 >= self.max_expired_rounds:
                    raise
        raise AssertionError("unreachable")

    async def aacquire(self, limit: str, permits: int = 1, timeout: Optional[Seconds] = None) -> Grant:
        """:meth:`acquire` for asyncio: reserves in the client's threads and
        waits with :func:`asyncio.sleep`; never blocks the event loop.

        Cancelling it (``task.cancel()``, ``asyncio.wait_for``) does not
        stop a reserve already running in the client's threads: that
        reserve completes, and a permit it was granted is consumed unused.
        Against a sidecar such a reserve also keeps one of the client's
        ``async_workers`` threads for up to its ``max_wait``."""
        deadline = self._deadline(timeout)
        for rnd in range(self.max_expired_rounds):
            g = await self._aacquire_grant(limit, permits, deadline)
            if g.spaced:
                raise self._spaced(g)
            try:
                await g.asleep()
                return g
            except Expired:
                if rnd + 1 >= self.max_expired_rounds:
                    raise
        raise AssertionError("unreachable")

    def try_acquire(self, limit: str, permits: int = 1, max_wait: Seconds = 0.0) -> Optional[Grant]:
        """Reserves ``permits`` permits of ``limit`` if they can be used within
        ``max_wait`` seconds, sleeps until then and returns the grant; returns
        ``None`` at once when refused (or when the permit expired before
        use). The throttle's ``skip`` mode."""
        g = self.reserve(limit, permits, max_wait)
        if not g.granted:
            return None
        if g.spaced:
            raise self._spaced(g)
        try:
            g.sleep()
        except Expired:
            return None
        return g

    async def atry_acquire(self, limit: str, permits: int = 1, max_wait: Seconds = 0.0) -> Optional[Grant]:
        """:meth:`try_acquire` for asyncio."""
        g = await self.areserve(limit, permits, max_wait)
        if not g.granted:
            return None
        if g.spaced:
            raise self._spaced(g)
        try:
            await g.asleep()
        except Expired:
            return None
        return g

    def acquire_each(self, limit: str, permits: int, timeout: Optional[Seconds] = None) -> Iterator[int]:
        """Acquires ``permits`` permits of ``limit`` and yields 0, 1, ...,
        permits-1, each at the moment that permit may be used: together for
        the algorithms that grant permits together, one interval apart for a
        strict limit. Use one permit per item, right away::

            for j in client.acquire_each("api", 3):
                call_api()

        If a permit expires before its turn (the loop's body took too long),
        the rest are reserved again, at most ``max_expired_rounds`` times. A
        permit is never yielded twice, nor after its expiry.
        """
        deadline = self._deadline(timeout)
        done = 0
        rnd = 0
        while done < permits:
            g = self._acquire_grant(limit, permits - done, deadline)
            for j in range(g.permits):
                try:
                    g.sleep(j)
                except Expired:
                    rnd += 1
                    if rnd >= self.max_expired_rounds:
                        raise
                    break
                yield done
                done += 1

    async def aacquire_each(self, limit: str, permits: int, timeout: Optional[Seconds] = None) -> AsyncIterator[int]:
        """:meth:`acquire_each` for asyncio (``async for j in ...``)."""
        deadline = self._deadline(timeout)
        done = 0
        rnd = 0
        while done < permits:
            g = await self._aacquire_grant(limit, permits - done, deadline)
            for j in range(g.permits):
                try:
                    await g.asleep(j)
                except Expired:
                    rnd += 1
                    if rnd >= self.max_expired_rounds:
                        raise
                    break
                yield done
                done += 1

    def permit(self, limit: str, permits: int = 1, timeout: Optional[Seconds] = None) -> "Permit":
        """A context manager that acquires before its body runs, for ``with``
        and ``async with``::

            with client.permit("api"):
                call_api()

            async with client.permit("api"):
                await call_api()

        It enters with the :class:`Grant` and raises as :meth:`acquire`
        (:class:`Throttled` when ``timeout`` runs out). Leaving it returns
        nothing to the register: a permit is spent once used.
        """
        return Permit(self, limit, permits, timeout)

    def throttle(
        self,
        limit: str,
        mode: str = "block",
        max_wait: Seconds = 0.0,
        permits: int = 1,
        timeout: Optional[Seconds] = None,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """:func:`permitd.throttle` with this client."""
        from ._throttle import throttle

        return throttle(limit, client=self, mode=mode, max_wait=max_wait, permits=permits, timeout=timeout)

    # -- administration ---------------------------------------------------

    def _call(self, method: str, path: str, payload: Any = None, deadline: Optional[float] = None) -> Any:
        return self._call_from(method, path, payload, deadline)[0]

    def _call_from(self, method: str, path: str, payload: Any = None, deadline: Optional[float] = None) -> Tuple[Any, str]:
        """_call, and the base URL of the server that answered."""
        what = method + " " + path
        body = None if payload is None else json.dumps(payload).encode("utf-8")
        r = self._t.send(method, path, body, what=what, timeout=self.timeout, deadline=deadline)
        if not 200 <= r.status < 300:
            raise error_for(r.status, r.error_text(), r.server, what)
        if not r.body.strip():
            return {}, r.server
        try:
            return json.loads(r.body.decode("utf-8")), r.server
        except (ValueError, UnicodeDecodeError) as e:
            raise PermitdError("%s: cannot decode the answer: %s" % (what, e), status=r.status, server=r.server)

    def put_limit(
        self,
        name: str,
        algorithm: str,
        rate: Optional[float] = None,
        per: Optional[Union[str, Seconds]] = None,
        **options: Any,
    ) -> Dict[str, Any]:
        """Creates or replaces a limit (``PUT /v1/limits/{name}``) and returns
        its view. Durations (``per``, ``expiry``, ``warmup``, ``ttl``) are Go
        duration strings ("6s") or seconds; ``per`` defaults to the
        server's ("1s"); other options as the HTTP API names them
        (``max_reserved=2``, ``max_burst_seconds=1``, ``shadow=True``,
        ...). A concurrency limit has no rate: ``put_limit("gpu",
        "concurrency", max_in_flight=4, ttl=60)``."""
        return self._call("PUT", "/v1/limits/" + quote(name, safe=""), _limit_body(algorithm, rate, per, options))

    def get_limit(self, name: str) -> Dict[str, Any]:
        """Returns a limit's view (``GET /v1/limits/{name}``): its settings and
        counters: ``granted_requests`` and ``granted_permits`` (answered as
        grants; a refund does not lower them), ``refused_requests`` (answered
        429, ``expired_requests`` included: grants whose permit expired
        before their answer left), ``refunded_permits``, ``charged_permits``
        and ``net_permits`` (granted + expired - refunded + charged), and in
        shadow mode ``shadow_granted``, ``shadow_would_refuse`` and
        ``shadow_would_wait``."""
        return self._call("GET", "/v1/limits/" + quote(name, safe=""))

    def list_limits(self) -> List[Dict[str, Any]]:
        """Returns every limit's view, sorted by name, read page by page
        (``GET /v1/limits?limit=10000&after=``, as ``iter_limits``): the
        unpaged ``GET /v1/limits`` is refused once the register holds more
        than 10 000 limits."""
        return list(self.iter_limits(page=10000))

    def list_limits_page(
        self, prefix: str = "", after: str = "", limit: Optional[int] = None
    ) -> Tuple[List[Dict[str, Any]], str]:
        """Returns one page of limit views, sorted by name, whose names start
        with ``prefix`` and sort after ``after`` (``GET
        /v1/limits?prefix=&after=&limit=``; ``limit`` 1-10000, 1000 if None),
        and the ``after`` of the next page: "" when no more limits with the
        prefix follow."""
        q = "?prefix=" + quote(prefix, safe="")
        if after:
            q += "&after=" + quote(after, safe="")
        if limit is not None:
            q += "&limit=%d" % limit
        v = self._call("GET", "/v1/limits" + q)
        return list(v.get("limits", [])), str(v.get("next_after", ""))

    def iter_limits(self, prefix: str = "", page: Optional[int] = None) -> Iterator[Dict[str, Any]]:
        """Yields every limit view whose name starts with ``prefix``, sorted by
        name, reading one page (``page`` limits) at a time."""
        after = ""
        while True:
            limits, nxt = self.list_limits_page(prefix, after, page)
            yield from limits
            if not nxt or nxt <= after:  # done, or a server that does not page
                return
            after = nxt

    def delete_limit(self, name: str, force: bool = False) -> None:
        """Deletes a limit (``DELETE /v1/limits/{name}``); ``force`` deletes a
        leased limit even while leases hold permits of it."""
        self._call("DELETE", "/v1/limits/" + quote(name, safe="") + ("?force=true" if force else ""))

    def put_template(
        self,
        prefix: str,
        algorithm: str,
        rate: Optional[float] = None,
        per: Optional[Union[str, Seconds]] = None,
        *,
        idle: Union[str, Seconds],
        max_keys: int,
        **options: Any,
    ) -> Dict[str, Any]:
        """Creates or replaces the template of ``prefix`` (``PUT
        /v1/templates/{prefix}``) and returns its view: a reserve naming
        ``prefix:key`` creates that limit from it on first use, and the
        register drops the key once it has gone unused for ``idle`` (a Go
        duration string or seconds, 1s to 720h) and forgetting it changes
        no answer; at most ``max_keys`` keys live at once (a reserve past it
        is refused with ``keys_full``). The configuration is
        :meth:`put_limit`'s (no ``shadow``)."""
        body = _limit_body(algorithm, rate, per, options)
        body["idle"], body["max_keys"] = _go_duration(idle, "idle"), max_keys
        return self._call("PUT", "/v1/templates/" + quote(prefix, safe=""), body)

    def get_template(self, prefix: str) -> Dict[str, Any]:
        """Returns the template of ``prefix`` (``GET /v1/templates/{prefix}``):
        its keys' configuration, ``idle``, ``max_keys`` and ``live_keys``."""
        return self._call("GET", "/v1/templates/" + quote(prefix, safe=""))

    def list_templates(self) -> List[Dict[str, Any]]:
        """Returns every template's view, sorted by prefix (``GET
        /v1/templates``): the active ones, and the deleted ones whose keys
        still live (``deleted`` true: they create no key, and go with
        their last)."""
        v = self._call("GET", "/v1/templates")
        return list(v.get("templates", []))

    def delete_template(self, prefix: str) -> Dict[str, Any]:
        """Deletes the template of ``prefix`` (``DELETE
        /v1/templates/{prefix}``): it creates no more keys; its live keys
        (``live_keys`` of the answer) stay until idle."""
        return self._call("DELETE", "/v1/templates/" + quote(prefix, safe=""))

    def set_lease_policy(
        self,
        name: str,
        leased: bool,
        burst_permits: int = 0,
        max_outstanding_permits: int = 0,
    ) -> Dict[str, Any]:
        """Makes a limit leased (served by worker sidecars) or linearized
        (``PUT /v1/limits/{name}/lease-policy``); 0 means the default."""
        body = {"leased": leased, "burst_permits": burst_permits, "max_outstanding_permits": max_outstanding_permits}
        return self._call("PUT", "/v1/limits/" + quote(name, safe="") + "/lease-policy", body)

    def status(self) -> Dict[str, Any]:
        """The status of the first server that answers (``GET /v1/status``)."""
        return self._call("GET", "/v1/status")


class Permit:
    """The context manager of :meth:`Client.permit`, for ``with`` and
    ``async with``. It holds no resource: a permit is spent once used."""

    __slots__ = ("_client", "_limit", "_permits", "_timeout", "grant")

    def __init__(self, client: Client, limit: str, permits: int, timeout: Optional[Seconds]) -> None:
        self._client = client
        self._limit = limit
        self._permits = permits
        self._timeout = timeout
        #: The grant of the last entry, or None before it.
        self.grant: Optional[Grant] = None

    def __enter__(self) -> Grant:
        self.grant = self._client.acquire(self._limit, self._permits, self._timeout)
        return self.grant

    def __exit__(self, *exc: Any) -> None:
        return None

    async def __aenter__(self) -> Grant:
        self.grant = await self._client.aacquire(self._limit, self._permits, self._timeout)
        return self.grant

    async def __aexit__(self, *exc: Any) -> None:
        return None


class PendingReservation(collections.abc.Coroutine):
    """What :meth:`Client.areserve_many` returns: a coroutine (await it,
    or give it to :func:`asyncio.run` or :func:`asyncio.create_task`) that
    reserves in the client's threads and returns the :class:`Reservation`;
    and an asynchronous context manager: ``async with`` reserves, then
    enters and leaves that reservation as :class:`Reservation` describes.
    Each ``async with`` is a reserve of its own (a new request ID unless
    one was given); a coroutine runs once."""

    __slots__ = ("_client", "_args", "_coro", "reservation")

    def __init__(self, client: Client, *args: Any) -> None:
        self._client = client
        self._args = args
        self._coro: Optional[Any] = None
        #: The reservation of the current ``async with``, or None.
        self.reservation: Optional[Reservation] = None

    async def _reserve(self) -> Reservation:
        limits, max_wait, settle_within, timeout, request_id = self._args
        return await self._client._run_async(
            self._client.reserve_many, limits, max_wait, settle_within, timeout, request_id=request_id
        )

    def _inner(self) -> Any:
        if self._coro is None:
            self._coro = self._reserve()
        return self._coro

    def __await__(self) -> Generator[Any, None, Reservation]:
        return self._inner().__await__()

    def send(self, value: Any) -> Any:
        """Runs the reserve's coroutine (the :class:`collections.abc.Coroutine`
        protocol, used by the event loop)."""
        return self._inner().send(value)

    def throw(self, *args: Any) -> Any:
        """Raises into the reserve's coroutine (the coroutine protocol)."""
        return self._inner().throw(*args)

    def close(self) -> None:
        """Closes the reserve's coroutine, if it was started."""
        if self._coro is not None:
            self._coro.close()

    async def __aenter__(self) -> Reservation:
        r = await self._reserve()
        await r.__aenter__()
        self.reservation = r
        return r

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        r, self.reservation = self.reservation, None
        if r is not None:
            await r.__aexit__(exc_type, exc, tb)


_default: Optional[Client] = None
_default_lock = threading.Lock()

# Every live client, so that a forked child can reset their locks (another
# thread of the parent may have held one at the fork) and connections.
_clients: "weakref.WeakSet[Client]" = weakref.WeakSet()


def _after_fork_in_child() -> None:
    global _default_lock
    _default_lock = threading.Lock()
    for c in list(_clients):
        c._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def set_default_client(client: Optional[Client]) -> None:
    """Sets the client that :func:`permitd.throttle` uses when given none."""
    global _default
    with _default_lock:
        _default = client


def default_client() -> Client:
    """The default client: the one given to :func:`set_default_client`, else
    one made on first use from the environment: ``PERMITD_SERVERS``
    ("host:port,host:port,..."), ``PERMITD_TOKEN``, ``PERMITD_TLS_CA``,
    ``PERMITD_TLS_CERT`` and ``PERMITD_TLS_KEY``."""
    global _default
    with _default_lock:
        if _default is None:
            servers = os.environ.get("PERMITD_SERVERS", "")
            if not servers.strip():
                raise InvalidRequest(
                    "no client: pass client= to throttle, call permitd.set_default_client, or set PERMITD_SERVERS"
                )
            _default = Client(
                servers,
                ca_file=os.environ.get("PERMITD_TLS_CA") or None,
                cert_file=os.environ.get("PERMITD_TLS_CERT") or None,
                key_file=os.environ.get("PERMITD_TLS_KEY") or None,
            )
        return _default
