"""HTTP transport of the permitd client: connection pools, one attempt, and
failover across servers.

A request goes first to the last server that answered. A connection error,
a timeout or a 503 moves it to the next server (round-robin); after each
full round the transport backs off with full jitter (uniform in
``[0, min(backoff_max, backoff_base * 2**k)]``), but at least as long as the
last 503's ``Retry-After`` (capped at ``backoff_max``), for at most
``rounds * len(servers)`` attempts. Any other answer (2xx, 4xx) is returned
as is. The same request ID is sent on every attempt (the body differs
only by a max_wait lowered to a sidecar's cap), so the register answers
a retry of a decided request with the first decision.

A caller's deadline bounds the whole: it is checked before every attempt
and every backoff, each attempt gets at most the time left (connecting at
most the connect timeout, also bounded by it), and when the deadline ends
the call :class:`DeadlineReached` is raised (the client turns it into
``Throttled``).

Everything here blocks; the asynchronous API runs it in a thread pool.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import random
import socket
import ssl
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple
from urllib.parse import urlsplit

from ._errors import InvalidRequest, Unavailable

#: Largest answer body the client reads.
MAX_RESPONSE_BYTES = 32 << 20


class Server:
    """One server of the client: its base URL and how to reach it."""

    __slots__ = ("base", "scheme", "host", "port")

    def __init__(self, base: str, scheme: str, host: str, port: int) -> None:
        self.base = base
        self.scheme = scheme
        self.host = host
        self.port = port

    def __repr__(self) -> str:
        return "Server(%r)" % self.base


def parse_server(s: str, tls: bool) -> Server:
    """Parses "host:port", "http://host:port" or "https://host:port".

    A bare "host:port" is https when ``tls`` is true (a CA file or SSL
    context was given), else http; a plain "http://" server is refused
    with TLS, as the Go client does.
    """
    if not isinstance(s, str) or not s:
        raise InvalidRequest("server %r; allowed: \"host:port\", \"http://host:port\" or \"https://host:port\"" % (s,))
    raw = s
    if "://" not in s:
        raw = ("https://" if tls else "http://") + s
    elif tls and s.startswith("http://"):
        raise InvalidRequest(
            "server %r is plain http but the client is configured for TLS; allowed: \"host:port\" or \"https://host:port\"" % s
        )
    try:
        u = urlsplit(raw)
        port = u.port
    except ValueError:
        port = None
        u = None
    if (
        u is None
        or u.scheme not in ("http", "https")
        or not u.hostname
        or port is None
        or u.path not in ("", "/")
        or u.query
        or u.fragment
        or u.username is not None
    ):
        raise InvalidRequest("server %r; allowed: \"host:port\", \"http://host:port\" or \"https://host:port\"" % s)
    host = u.hostname
    netloc = "[%s]:%d" % (host, port) if ":" in host else "%s:%d" % (host, port)
    return Server(u.scheme + "://" + netloc, u.scheme, host, port)


class Response:
    """One answer of one server.

    ``sent_at`` is when the attempt that got this answer was sent and
    ``received_at`` when its body had been read (before parsing), both on
    :func:`time.monotonic`.
    """

    __slots__ = ("server", "status", "headers", "body", "sent_at", "received_at", "_json")

    def __init__(self, server: str, status: int, headers: Any, body: bytes, sent_at: float, received_at: float):
        self.server = server
        self.status = status
        self.headers = headers  # read with .get(name): case-insensitive
        self.body = body
        self.sent_at = sent_at
        self.received_at = received_at
        self._json: Optional[dict] = None

    def json(self) -> dict:
        """The body decoded as a JSON object ({} when it is not one)."""
        if self._json is None:
            try:
                v = json.loads(self.body)
            except (ValueError, UnicodeDecodeError):
                v = {}
            self._json = v if isinstance(v, dict) else {}
        return self._json

    def error_text(self) -> str:
        """The server's "error" text, or the body itself (at most 1 KiB)."""
        e = self.json().get("error")
        if isinstance(e, str) and e:
            return e
        text = self.body.decode("utf-8", "replace").strip()
        if self.status == 400 and PLAIN_TLS_ANSWER in text:
            # A permitd agent's TLS port answered a plain request.
            return "this port speaks TLS, not plain HTTP: " + TLS_HINT + ", " + CLIENT_CERT_IF
        if self.status == 400 and HTTPS_ANSWER in text:
            # Go's net/http on a TLS port answered a plain request.
            return text.rstrip(".") + ": the server speaks TLS: " + TLS_HINT
        return text[:1024] + "..." if len(text) > 1024 else text

    def retry_after(self) -> Optional[float]:
        """Seconds the server asks the client to wait: ``retry_after_ns`` of
        the body (exact), else the ``Retry-After`` header (whole seconds),
        else ``None``."""
        v = self.json().get("retry_after_ns")
        if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
            return v / 1e9
        h = self.headers.get("Retry-After")
        if h is not None:
            try:
                return max(0.0, float(int(h.strip())))
            except ValueError:
                return None
        return None


class _OneWrite:
    """Sends a request's head and a bytes body in one write (http.client
    writes them separately: two segments with TCP_NODELAY, which costs
    both sides a read and the sender a second trip through the stack)."""

    def _send_output(self, message_body=None, encode_chunked=False):  # type: ignore[no-untyped-def]
        # http.client keeps the head's lines in the private list _buffer
        # (CPython 3.9 to 3.13). Should a release rename or retype it, the
        # check below fails and the request goes through http.client's own
        # _send_output (head and body in two writes): slower, never wrong.
        buf = getattr(self, "_buffer", None)
        if isinstance(message_body, bytes) and isinstance(buf, list) and not encode_chunked:
            buf.extend((b"", message_body))
            msg = b"\r\n".join(buf)
            del buf[:]
            self.send(msg)  # type: ignore[attr-defined]
            return
        super()._send_output(message_body, encode_chunked)  # type: ignore[misc]


class _HTTPConnection(_OneWrite, http.client.HTTPConnection):
    pass


class _HTTPSConnection(_OneWrite, http.client.HTTPSConnection):
    pass


class _Undelivered(Exception):
    """The attempt failed before a connection was open: nothing was sent."""


class _Ambiguous(Exception):
    """The attempt failed after the request may have been sent."""


class DeadlineReached(Unavailable):
    """The caller's deadline came before any server gave a usable answer
    (raised by :meth:`Transport.send`; the client raises ``Throttled`` from
    it). Its attributes are :class:`Unavailable`'s."""


# Failures of a reused keep-alive connection that the server had already
# closed: the request is sent again once on a fresh connection.
_STALE = (
    http.client.RemoteDisconnected,
    BrokenPipeError,
    ConnectionResetError,
    ConnectionAbortedError,
    ssl.SSLEOFError,
    ssl.SSLZeroReturnError,
)


class Transport:
    """Pooled HTTP/1.1 connections to a list of servers, with failover.

    Safe for concurrent use by threads, and for use in a child process after
    ``fork`` (the child drops the parent's connections and reseeds its
    jitter).
    """

    def __init__(
        self,
        servers: List[Server],
        *,
        ssl_context: Optional[ssl.SSLContext],
        token: Optional[str],
        rounds: int,
        backoff_base: float,
        backoff_max: float,
        seed: Optional[int] = None,
        max_idle_per_server: int = 64,
    ) -> None:
        self.servers = servers
        if ssl_context is None and any(s.scheme == "https" for s in servers):
            ssl_context = ssl.create_default_context()  # "https://" servers: the system's roots
        self._ssl = ssl_context
        self._token = token
        self.rounds = rounds
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self._seed = seed
        self._max_idle = max_idle_per_server
        self._last = 0
        self._init_process_state()

    def _init_process_state(self) -> None:
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._pools: List[List[http.client.HTTPConnection]] = [[] for _ in self.servers]
        if self._seed is not None:
            self._rng = random.Random(self._seed)
        else:
            self._rng = random.Random(int.from_bytes(os.urandom(16), "big"))

    def _check_fork(self) -> None:
        if os.getpid() != self._pid:
            # A forked child must not share the parent's sockets (their
            # answers would go to either process) nor its jitter sequence.
            # The parent's connections are dropped, not closed: closing a
            # TLS connection here could write to the parent's session.
            self._init_process_state()
            if self._seed is not None:
                self._rng.seed(self._seed ^ os.getpid())

    # -- jitter -----------------------------------------------------------

    def uniform(self, d: float) -> float:
        """A jitter uniform in ``[0, d]`` (0 when d <= 0)."""
        self._check_fork()
        if d <= 0:
            return 0.0
        with self._lock:
            return self._rng.uniform(0.0, d)

    def backoff(self, k: int, ceiling: Optional[float] = None) -> float:
        """Full jitter for the k-th retry (0-based): uniform in
        ``[0, min(backoff_max, backoff_base * 2**k, ceiling)]``."""
        self._check_fork()
        d = self.backoff_max
        if k < 62:
            d = min(d, self.backoff_base * (1 << k))
        if ceiling is not None and ceiling < d:
            d = ceiling
        if d <= 0:
            return 0.0
        with self._lock:
            return self._rng.uniform(0.0, d)

    # -- connections ------------------------------------------------------

    def _new_conn(self, i: int, timeout: float) -> http.client.HTTPConnection:
        s = self.servers[i]
        if s.scheme == "https":
            return _HTTPSConnection(s.host, s.port, timeout=timeout, context=self._ssl)
        return _HTTPConnection(s.host, s.port, timeout=timeout)

    def _get_conn(self, i: int) -> Optional[http.client.HTTPConnection]:
        with self._lock:
            pool = self._pools[i]
            return pool.pop() if pool else None

    def _put_conn(self, i: int, c: http.client.HTTPConnection) -> None:
        with self._lock:
            if os.getpid() == self._pid and len(self._pools[i]) < self._max_idle:
                self._pools[i].append(c)
                return
        c.close()

    def close(self) -> None:
        """Closes the idle connections; later requests open new ones."""
        with self._lock:
            pools, self._pools = self._pools, [[] for _ in self.servers]
        for pool in pools:
            for c in pool:
                c.close()

    # -- one attempt ------------------------------------------------------

    def _headers(self, body: Optional[bytes]) -> Dict[str, str]:
        h = {"Accept": "application/json"}
        if body is not None:
            h["Content-Type"] = "application/json"
        if self._token:
            h["Authorization"] = "Bearer " + self._token
        return h

    def attempt(
        self,
        i: int,
        method: str,
        path: str,
        body: Optional[bytes],
        timeout: float,
        connect_timeout: Optional[float] = None,
        deadline: Optional[float] = None,
    ) -> Response:
        """Sends one request to server i: connecting takes at most
        ``connect_timeout`` (default ``timeout``), the exchange at most
        ``timeout``, and neither goes past ``deadline``.
        Raises _Undelivered when no connection could be opened, _Ambiguous
        when the request may have been sent but no answer was read."""
        if connect_timeout is None:
            connect_timeout = timeout
        c = self._get_conn(i)
        if c is not None:
            try:
                return self._exchange(i, c, method, path, body, timeout, deadline)
            except _Ambiguous as e:
                if not isinstance(e.__cause__, _STALE):
                    raise
                # The server closed the idle connection (or died): send it
                # again once on a fresh connection. The request ID makes a
                # second decision impossible if the first one happened.
                try:
                    return self._fresh(i, method, path, body, timeout, connect_timeout, deadline)
                except _Undelivered as e2:
                    raise _Ambiguous(str(e2)) from e2.__cause__
        return self._fresh(i, method, path, body, timeout, connect_timeout, deadline)

    def _fresh(
        self,
        i: int,
        method: str,
        path: str,
        body: Optional[bytes],
        timeout: float,
        connect_timeout: float,
        deadline: Optional[float],
    ) -> Response:
        ct = _bounded(connect_timeout, deadline)
        if ct <= 0:
            raise _Undelivered("%s: not connected: the deadline came first" % self.servers[i].base)
        c = self._new_conn(i, ct)
        try:
            c.connect()
            try:
                c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except (OSError, AttributeError):
                pass
        except (OSError, ssl.SSLError, http.client.HTTPException) as e:
            c.close()
            raise _Undelivered("%s: cannot connect: %s" % (self.servers[i].base, _describe(e))) from e
        return self._exchange(i, c, method, path, body, timeout, deadline)

    def _exchange(
        self,
        i: int,
        c: http.client.HTTPConnection,
        method: str,
        path: str,
        body: Optional[bytes],
        timeout: float,
        deadline: Optional[float] = None,
    ) -> Response:
        base = self.servers[i].base
        t = _bounded(timeout, deadline)
        if t <= 0:
            # Nothing sent on this open connection: keep it for later.
            self._put_conn(i, c)
            raise _Undelivered("%s: not sent: the deadline came first" % base)
        try:
            # The attempt's budget t is shared by its phases (send, the
            # answer's head, its body): each blocking socket call waits at
            # most what is left of it.
            sent_at = time.monotonic()
            end = sent_at + t
            _settimeout(c, end)
            c.request(method, path, body=body, headers=self._headers(body))
            _settimeout(c, end)
            r = c.getresponse()
            _settimeout(c, end)
            data = r.read(MAX_RESPONSE_BYTES + 1)
            received_at = time.monotonic()
        except (OSError, ssl.SSLError, http.client.HTTPException) as e:
            c.close()
            raise _Ambiguous("%s: %s" % (base, _describe(e))) from e
        if len(data) > MAX_RESPONSE_BYTES:
            c.close()
            raise _Ambiguous("%s: answer larger than %d bytes" % (base, MAX_RESPONSE_BYTES))
        headers = r.msg  # an email.message.Message: case-insensitive get()
        if r.will_close:
            c.close()
        else:
            self._put_conn(i, c)
        return Response(base, r.status, headers, data, sent_at, received_at)

    # -- failover ---------------------------------------------------------

    def send(
        self,
        method: str,
        path: str,
        body: Optional[bytes],
        *,
        what: str,
        timeout: float,
        connect_timeout: Optional[float] = None,
        deadline: Optional[float] = None,
        body_for: Optional[Callable[[int], bytes]] = None,
    ) -> Response:
        """Sends a request with failover (see the module's doc) and returns
        the first answer that is not a 503.

        Each attempt connects within ``connect_timeout`` (default
        ``timeout``) and then waits at most ``timeout`` for the answer;
        with a ``deadline`` (a :func:`time.monotonic` value) neither goes
        past it, and no attempt or backoff starts after it. ``body_for(i)``,
        if given, is the body for server i (else ``body``).

        Raises:
            DeadlineReached: the deadline came before a usable answer.
            Unavailable: the attempts ran out.
        """
        self._check_fork()
        n = len(self.servers)
        start = self._last
        attempts = self.rounds * n
        undelivered = True
        last_failure = "none"
        last_503: Optional[Response] = None
        retry_after: Optional[float] = None
        made = 0
        expired = False
        last_error: Optional[BaseException] = None
        last_i = start
        for a in range(attempts):
            if a > 0 and a % n == 0:
                d = self.backoff(a // n - 1)
                if retry_after is not None:
                    d = max(d, min(retry_after, self.backoff_max))
                if deadline is not None and time.monotonic() + d >= deadline:
                    expired = True
                    break
                _sleep(d)
                retry_after = None
            if deadline is not None and time.monotonic() >= deadline:
                expired = True
                break
            i = (start + a) % n
            made += 1
            try:
                r = self.attempt(
                    i,
                    method,
                    path,
                    body if body_for is None else body_for(i),
                    timeout,
                    connect_timeout,
                    deadline,
                )
            except _Undelivered as e:
                last_failure, last_error, last_i = str(e), e.__cause__, i
                continue
            except _Ambiguous as e:
                undelivered = False
                last_failure, last_error, last_i = str(e), e.__cause__, i
                continue
            last_error = None
            if r.status == 503:
                undelivered = False
                last_503 = r
                retry_after = r.retry_after()
                last_failure = "%s answered 503: %s" % (r.server, r.error_text())
                continue
            self._last = i
            return r
        if not expired and deadline is not None and time.monotonic() >= deadline:
            expired = True  # the last attempt ran into the deadline
        if expired:
            msg = "%s: the deadline came after %s over %s; last failure: %s" % (
                what, plural(made, "attempt"), plural(n, "server"), last_failure)
        else:
            msg = "%s failed on %s over %s; last failure: %s" % (
                what, plural(made, "attempt"), plural(n, "server"), last_failure)
        if undelivered:
            msg += " (the request reached no server)"
        if last_error is not None:
            hint = wrong_port_hint(self.servers[last_i], last_error, deadline)
            if hint:
                msg += ": " + hint
        kw = {}
        if last_503 is not None:
            kw = {"error": last_503.error_text(), "status": 503, "server": last_503.server}
        cls = DeadlineReached if expired else Unavailable
        raise cls(msg, not_delivered=undelivered, last_failure=last_failure, **kw)


def plural(n: int, noun: str) -> str:
    """ "1 server", "3 servers"."""
    return "%d %s" % (n, noun) if n == 1 else "%d %ss" % (n, noun)


#: The longest TLS handshake :func:`wrong_port_hint` tries, in seconds.
TLS_PROBE_TIMEOUT = 1.0

#: What Go's net/http server answers a plain HTTP request on a TLS port
#: with (400).
HTTPS_ANSWER = "Client sent an HTTP request to an HTTPS server"

#: What a permitd agent's TLS port answers a plain HTTP request with (400).
PLAIN_TLS_ANSWER = "this port speaks TLS: use https://"

#: The fix for plain HTTP sent to a server that speaks TLS.
TLS_HINT = (
    "give the cluster's CA (permitd: --tls-ca FILE; Python: Client(ca_file=...) or $PERMITD_TLS_CA) "
    "or use https:// addresses"
)

#: What a TLS client may need besides the CA.
CLIENT_CERT_IF = (
    "with a client certificate (--tls-cert, --tls-key; Python: Client(cert_file=..., key_file=...)) "
    "if the agents run with --client-cert-auth"
)

#: The fix for TLS sent to a server that speaks plain HTTP.
PLAIN_HTTP_HINT = (
    "speaks plain HTTP, not TLS: drop the CA (permitd: --tls-ca; Python: Client(ca_file=...), "
    "or unset $PERMITD_TLS_CA if Client.from_env read it) or give http:// addresses"
)


def wrong_port_hint(server: Server, err: BaseException, deadline: Optional[float] = None) -> str:
    """What the server is when the last failure of a plain-HTTP call to it
    shows that it does not serve permitd's API over plain HTTP, or "" (the
    Go client's wrongPortHint):

    - the connection closed without an answer (RemoteDisconnected) and the
      server completes a TLS handshake: it speaks TLS (a permitd agent run
      with --tls-cert closes a plain connection that way);
    - the connection was reset without an answer: a node's raft port reads
      the request's first byte, finds no raft command and closes the
      connection with the rest unread.
    """
    if server.scheme == "https":
        return _wrong_tls_port_hint(server.base[len("https://"):], err)
    if server.scheme != "http":
        return ""
    hostport = server.base[len("http://"):]
    if isinstance(err, http.client.RemoteDisconnected):  # also a ConnectionResetError: first
        speaks, wants_cert = speaks_tls(server.host, server.port, _bounded(TLS_PROBE_TIMEOUT, deadline))
        if speaks and wants_cert:
            return (
                "%s speaks TLS, not plain HTTP, and asks for a client certificate: %s, with a client certificate "
                "(--tls-cert, --tls-key; Python: Client(cert_file=..., key_file=...)); or, if it is a node's raft port, "
                "give its --http-addr" % (hostport, TLS_HINT)
            )
        if speaks:
            return "%s speaks TLS, not plain HTTP: %s" % (hostport, TLS_HINT)
        return ""
    if isinstance(err, ConnectionResetError):
        return (
            "%s reset the connection without an HTTP answer, as a node's raft port does: give the nodes' HTTP API "
            "addresses (their --http-addr), not their --raft-addr" % hostport
        )
    return ""


def _wrong_tls_port_hint(hostport: str, err: BaseException) -> str:
    """wrong_port_hint for an https server: it answered in plain HTTP (the
    handshake read an HTTP answer), or asked for a client certificate the
    client has none for, as a node's raft port (mutual TLS) does, or reset
    the connection (a raft port whose CA signed the client's certificate)."""
    text = str(err)
    if isinstance(err, ssl.SSLError) and ("WRONG_VERSION_NUMBER" in text or "record layer failure" in text):
        return "%s %s" % (hostport, PLAIN_HTTP_HINT)
    if isinstance(err, ssl.SSLError) and "CERTIFICATE_REQUIRED" in text:
        return (
            "%s asks for a client certificate, as a node's raft port (mutual TLS) does: give the nodes' HTTP API "
            "addresses (their --http-addr), not their --raft-addr; if it is the API port of an agent run with "
            "--client-cert-auth, give a client certificate (Client(cert_file=..., key_file=...))" % hostport
        )
    if isinstance(err, ConnectionResetError):
        return (
            "%s reset the connection without an HTTP answer, as a node's raft port does: give the nodes' HTTP API "
            "addresses (their --http-addr), not their --raft-addr" % hostport
        )
    return ""


def speaks_tls(host: str, port: int, timeout: float) -> Tuple[bool, bool]:
    """Whether a TLS handshake with host:port within timeout seconds
    succeeds (or fails on a TLS alert, such as a required client
    certificate), and whether the server's alert asked for a client
    certificate. It only detects TLS: it verifies nothing and sends no
    request."""
    if timeout <= 0:
        return False, False
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # a probe: nothing is sent
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    asked: List[bool] = []
    try:
        # The server's CertificateRequest, seen through CPython's private
        # message callback (3.8+; in TLS 1.3 the handshake completes on
        # the client's side before the server checks the certificate).
        # Without it the probe still detects TLS.
        def seen(conn: Any, direction: str, version: Any, content_type: Any, msg_type: Any, data: Any) -> None:
            if direction == "read" and content_type == _HANDSHAKE and msg_type == _CERTIFICATE_REQUEST:
                asked.append(True)

        ctx._msg_callback = seen  # type: ignore[attr-defined]
    except (AttributeError, TypeError):
        pass
    try:
        with socket.create_connection((host, port), timeout=timeout) as raw:
            with ctx.wrap_socket(raw, server_hostname=host) as tls:
                tls.do_handshake()
        return True, bool(asked)
    except ssl.SSLError as e:
        reason = (getattr(e, "reason", None) or "").upper()
        return "ALERT" in reason, bool(asked) or "CERTIFICATE_REQUIRED" in reason
    except (OSError, ValueError):
        return False, False


#: TLS's ContentType handshake and HandshakeType certificate_request
#: (RFC 8446 sections 5.1 and 4).
_HANDSHAKE = 22
_CERTIFICATE_REQUEST = 13


def _bounded(t: float, deadline: Optional[float]) -> float:
    """t, or the time left before deadline if that is shorter."""
    if deadline is None:
        return t
    return min(t, deadline - time.monotonic())


def _settimeout(c: http.client.HTTPConnection, end: float) -> None:
    """Makes c's socket calls wait at most until end; raises
    socket.timeout when end has passed."""
    left = end - time.monotonic()
    if left <= 0:
        raise socket.timeout("timed out")
    if c.sock is not None:
        c.sock.settimeout(left)


def _describe(e: BaseException) -> str:
    text = str(e)
    name = type(e).__name__
    return "%s: %s" % (name, text) if text else name


# The longest single sleep; longer waits sleep again. time.sleep and
# asyncio.sleep fail (OverflowError) past the platform's time_t, which a
# wait the register may grant or a retry_after it may name (up to 2**63-1
# nanoseconds: 292 years) exceeds.
_MAX_SLEEP = 86400.0


def _sleep(d: float) -> None:
    """Sleeps d seconds on the monotonic clock, never less."""
    if d <= 0:
        return
    sleep_until(time.monotonic() + d)


def sleep_until(t: float) -> None:
    """Sleeps until :func:`time.monotonic` reaches t."""
    while True:
        left = t - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(left, _MAX_SLEEP))


async def _asleep(d: float) -> None:
    """:func:`_sleep` for asyncio."""
    if d <= 0:
        return
    await asleep_until(time.monotonic() + d)


async def asleep_until(t: float) -> None:
    """:func:`sleep_until` for asyncio."""
    while True:
        left = t - time.monotonic()
        if left <= 0:
            return
        await asyncio.sleep(min(left, _MAX_SLEEP))


def split_hostport(s: str) -> Tuple[str, int]:
    """Splits "host:port" (for tests and tools)."""
    srv = parse_server(s, False)
    return srv.host, srv.port
