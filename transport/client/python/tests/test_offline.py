"""The client without a cluster: deadlines against servers that never
answer, the throttle's detection of asynchronous functions, and the
parsing of a sidecar's max_wait cap."""

from __future__ import annotations

import asyncio
import functools
import gc
import http.server
import inspect
import json
import socket
import threading
import time
import unittest
import urllib.parse
import warnings
from typing import Any, Dict, List

import harness  # noqa: F401  (puts src/ on sys.path)
import permitd


def silent_server(test: unittest.TestCase, backlog: int = 16) -> str:
    """A listening socket that never accepts nor answers: the kernel
    completes the TCP handshake, the request goes into its buffer, and no
    answer ever comes. Returns its "host:port"."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    s.listen(backlog)
    test.addCleanup(s.close)
    return "127.0.0.1:%d" % s.getsockname()[1]


def full_backlog_server(test: unittest.TestCase) -> str:
    """A listening socket whose accept queue is full: the kernel drops
    further SYNs, so a connect hangs until its timeout. Returns its
    "host:port", or skips when the queue cannot be filled here."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    s.listen(0)
    test.addCleanup(s.close)
    addr = s.getsockname()
    for _ in range(8):
        c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        test.addCleanup(c.close)
        c.settimeout(0.2)
        try:
            c.connect(addr)
        except OSError:
            return "127.0.0.1:%d" % addr[1]  # this one hung: the queue is full
    test.skipTest("cannot fill a listening socket's accept queue here")
    return ""


class DeadlineTest(unittest.TestCase):
    # The slack over the caller's 0.2 s timeout: a thread switch and the
    # raise, on a loaded machine.
    TIMEOUT = 0.2
    SLACK = 0.3

    def client(self, servers: List[str], **kw: Any) -> permitd.Client:
        c = permitd.Client(servers, **kw)
        self.addCleanup(c.close)
        return c

    def test_acquire_timeout_bounds_silent_servers(self) -> None:
        # Each attempt used to get the client's timeout plus max_wait (1.2 s
        # here), and the deadline was checked between rounds only: 2.4 s.
        a = silent_server(self)
        c = self.client([a, a], timeout=1, rounds=1)
        t0 = time.monotonic()
        with self.assertRaises(permitd.Throttled) as cm:
            c.acquire("x", timeout=self.TIMEOUT)
        took = time.monotonic() - t0
        self.assertLess(took, self.TIMEOUT + self.SLACK, "acquire(timeout=0.2) took %.3fs" % took)
        self.assertGreaterEqual(took, self.TIMEOUT - 0.01)
        e = cm.exception
        self.assertEqual(e.limit, "x")
        self.assertIn("within the timeout", str(e))
        self.assertIn("timed out", str(e))  # the last failure is named
        self.assertIsInstance(e.__cause__, permitd.Unavailable)
        self.assertFalse(e.__cause__.not_delivered)  # sent, never answered

    def test_aacquire_and_reserve_deadline_bound_silent_servers(self) -> None:
        a = silent_server(self)
        c = self.client([a, a, a], timeout=1, rounds=2)

        async def run() -> float:
            t0 = time.monotonic()
            with self.assertRaises(permitd.Throttled):
                await c.aacquire("x", timeout=self.TIMEOUT)
            return time.monotonic() - t0

        took = asyncio.run(run())
        self.assertLess(took, self.TIMEOUT + self.SLACK, "aacquire(timeout=0.2) took %.3fs" % took)
        t0 = time.monotonic()
        with self.assertRaises(permitd.Throttled):
            c.reserve("x", max_wait=5, deadline=time.monotonic() + self.TIMEOUT)
        took = time.monotonic() - t0
        self.assertLess(took, self.TIMEOUT + self.SLACK, "reserve(deadline=+0.2s) took %.3fs" % took)

    def test_reservation_timeouts_bound_silent_servers(self) -> None:
        # reserve_many's timeout is a deadline as reserve's: Throttled;
        # settle's and release's end in Unavailable (they are not refusals).
        a = silent_server(self)
        c = self.client([a, a], timeout=1, rounds=2)
        for what, call, exc in (
            ("reserve_many", lambda: c.reserve_many({"x": 1, "y": 2}, max_wait=5, timeout=self.TIMEOUT), permitd.Throttled),
            ("areserve_many", lambda: asyncio.run(c.areserve_many({"x": 1}, timeout=self.TIMEOUT)), permitd.Throttled),
            ("settle", lambda: c.settle("7", {"x": 0}, timeout=self.TIMEOUT), permitd.Unavailable),
            ("release", lambda: c.release(7, timeout=self.TIMEOUT), permitd.Unavailable),
        ):
            t0 = time.monotonic()
            with self.assertRaises(exc, msg=what) as cm:
                call()
            took = time.monotonic() - t0
            self.assertLess(took, self.TIMEOUT + self.SLACK, "%s(timeout=0.2) took %.3fs" % (what, took))
            if exc is permitd.Throttled:
                self.assertIsInstance(cm.exception.__cause__, permitd.Unavailable, what)

    def test_without_deadline_attempts_are_bounded_and_unavailable(self) -> None:
        # No deadline: each attempt gets timeout + max_wait, and running
        # out of attempts is Unavailable, not Throttled.
        a = silent_server(self)
        c = self.client([a, a], timeout=0.15, rounds=1)
        t0 = time.monotonic()
        with self.assertRaises(permitd.Unavailable) as cm:
            c.reserve("x", max_wait=0.05)
        took = time.monotonic() - t0
        self.assertNotIsInstance(cm.exception, permitd.Throttled)
        self.assertIn("2 attempts over 2 servers", str(cm.exception))
        self.assertGreaterEqual(took, 2 * 0.2 - 0.02)
        self.assertLess(took, 2 * 0.2 + self.SLACK)

    def test_connect_uses_the_client_timeout_alone(self) -> None:
        # A server that never completes the handshake: connecting may take
        # the client's timeout, not timeout + max_wait (3.2 s here).
        a = full_backlog_server(self)
        c = self.client([a], timeout=0.2, rounds=1)
        t0 = time.monotonic()
        with self.assertRaises(permitd.Unavailable) as cm:
            c.reserve("x", max_wait=3)
        took = time.monotonic() - t0
        self.assertLess(took, 0.2 + self.SLACK, "connect took %.3fs" % took)
        self.assertTrue(cm.exception.not_delivered, cm.exception)
        self.assertIn("cannot connect", cm.exception.last_failure)


def write_answer(h: http.server.BaseHTTPRequestHandler, status: int, body: bytes, headers: Dict[str, str]) -> None:
    """Writes a JSON answer of this status, body and headers."""
    h.send_response(status)
    h.send_header("Content-Type", "application/json")
    for k, v in headers.items():
        h.send_header(k, v)
    h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    h.wfile.write(body)


def answering_server(test: unittest.TestCase, status: int, body: bytes, headers: "dict[str, str]", delay: float = 0.0) -> "tuple[str, List[float]]":
    """A server that answers every POST with this status, body and headers,
    after delay seconds; returns its "host:port" and the times of the
    requests it got."""
    hits: List[float] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            hits.append(time.monotonic())
            if delay:
                time.sleep(delay)
            write_answer(self, status, body, headers)

        def log_message(self, *args: Any) -> None:
            pass

    return serve(test, Handler), hits


def serve(test: unittest.TestCase, handler: Any) -> str:
    """Serves handler (a BaseHTTPRequestHandler class) until the test ends;
    returns its "host:port"."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    test.addCleanup(srv.server_close)
    test.addCleanup(srv.shutdown)
    return "127.0.0.1:%d" % srv.server_address[1]


class ListLimitsTest(unittest.TestCase):
    """list_limits reads the register page by page (GET /v1/limits?limit=
    10000&after=), following next_after until it is absent: the unpaged
    list is refused past 10 000 limits."""

    def test_follows_next_after(self) -> None:
        names = ["k:%05d" % i for i in range(25)]
        paths: List[str] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
                paths.append(self.path)
                q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
                after = q.get("after", [""])[0]
                rest = [n for n in names if n > after]
                page = rest[:10]  # a server whose pages hold 10
                out: Dict[str, Any] = {"limits": [{"name": n} for n in page]}
                if len(rest) > len(page):
                    out["next_after"] = page[-1]
                write_answer(self, 200, json.dumps(out).encode(), {})

            def log_message(self, *args: Any) -> None:
                pass

        c = permitd.Client([serve(self, Handler)])
        self.addCleanup(c.close)
        self.assertEqual([v["name"] for v in c.list_limits()], names)
        self.assertEqual(len(paths), 3)
        self.assertTrue(all("limit=10000" in p for p in paths), paths)


class RetryAfterTest(unittest.TestCase):
    """A 503's Retry-After sets the least wait before the next round (the
    README: at least the last 503's Retry-After, capped at backoff_max), so
    that a full or overloaded node is not hammered and the attempts are not
    spent in a few milliseconds."""

    def test_waits_the_retry_after_capped_at_backoff_max(self) -> None:
        # (Retry-After, backoff_max, least gap, most gap) between the two rounds.
        for header, cap, least, most in (("1", 2.0, 1.0, 2.0), ("9", 0.3, 0.3, 1.3)):
            with self.subTest(retry_after=header, backoff_max=cap):
                addr, hits = answering_server(
                    self, 503, b'{"error":"reserve: overloaded: the node holds as many reserves as it may"}', {"Retry-After": header}
                )
                c = permitd.Client([addr], rounds=2, backoff_base=0.001, backoff_max=cap)
                self.addCleanup(c.close)
                with self.assertRaises(permitd.Unavailable):
                    c.reserve("x", max_wait=0)
                self.assertEqual(len(hits), 2)
                self.assertGreaterEqual(hits[1] - hits[0], least - 0.02)
                self.assertLess(hits[1] - hits[0], most + 1.0)


class HoldEndTest(unittest.TestCase):
    """A reservation's in-flight hold ends hold_expires_in_ns after the
    answer left the server, counted from the request's sending plus
    held_ns (never later than the register frees the slot), apart from
    the strict permit's earlier expiry; a server that does not say it is
    taken at the expiry, which is never later."""

    def test_hold_expires_at(self) -> None:
        cases = (
            (b'{"granted":true,"wait_ns":0,"expires_in_ns":20000000,"reservation_id":"3","holds":true,"hold_expires_in_ns":2000000000,"held_ns":1500}', 2.0000015),
            (b'{"granted":true,"wait_ns":0,"expires_in_ns":20000000,"reservation_id":"3","holds":true,"held_ns":1500}', 0.0200015),
            (b'{"granted":true,"wait_ns":0,"expires_in_ns":-1,"reservation_id":"3","holds":true,"hold_expires_in_ns":-1,"held_ns":0}', 0.0),
            (b'{"granted":true,"wait_ns":0,"expires_in_ns":20000000,"reservation_id":"3","holds":false,"hold_expires_in_ns":0,"held_ns":0}', None),
        )
        for body, after_sent in cases:
            with self.subTest(body=body):
                addr, _ = answering_server(self, 200, body, {})
                c = permitd.Client([addr])
                self.addCleanup(c.close)
                r = c.reserve_many({"rpm": 1, "cap": 1}, max_wait=1)
                self.assertTrue(r.granted, r)
                if after_sent is None:
                    self.assertIsNone(r.hold_expires_at())
                    continue
                self.assertAlmostEqual(r.hold_expires_at() - r.sent_at, after_sent, delta=1e-9)


class ExpiredRoundsTest(unittest.TestCase):
    """The README: acquire raises Expired once max_expired_rounds permits in
    a row have expired (4 by default: at most 3 new reserves), and never
    hands out, yields or runs a function on an expired permit. The server
    grants permits of 1 us of expiry, 30 ms late."""

    def stub(self) -> "tuple[str, List[float]]":
        return answering_server(self, 200, b'{"granted":true,"wait_ns":0,"spacing_ns":0,"expires_in_ns":1000}', {}, delay=0.03)

    def test_acquire_raises_expired_after_max_expired_rounds(self) -> None:
        for rounds in (4, 2):
            with self.subTest(max_expired_rounds=rounds):
                addr, hits = self.stub()
                kw = {} if rounds == 4 else {"max_expired_rounds": rounds}
                c = permitd.Client([addr], timeout=2, **kw)
                self.addCleanup(c.close)
                with self.assertRaises(permitd.Expired):
                    c.acquire("x", timeout=5)
                self.assertEqual(len(hits), rounds, "reserves made")
                del hits[:]
                with self.assertRaises(permitd.Expired):
                    asyncio.run(c.aacquire("x", timeout=5))
                self.assertEqual(len(hits), rounds, "reserves made (async)")
                del hits[:]
                used: List[int] = []
                with self.assertRaises(permitd.Expired):
                    for j in c.acquire_each("x", 2, timeout=5):
                        used.append(j)
                self.assertEqual(used, [], "an expired permit was yielded")
                self.assertEqual(len(hits), rounds, "reserves made (each)")

    def test_throttle_never_runs_on_an_expired_permit(self) -> None:
        addr, _ = self.stub()
        c = permitd.Client([addr], timeout=2)
        self.addCleanup(c.close)
        ran: List[int] = []

        @permitd.throttle("x", client=c, timeout=5)
        def f() -> None:
            ran.append(1)

        with self.assertRaises(permitd.Expired):
            f()

        @permitd.throttle("x", client=c, mode="skip", max_wait=1)
        def g() -> None:
            ran.append(1)

        self.assertIsNone(g())
        self.assertEqual(ran, [])


class FakeClient:
    """Counts the throttle's calls; grants at once."""

    def __init__(self) -> None:
        self.calls: List[str] = []

    def acquire(self, limit: str, permits: int, timeout: Any) -> None:
        self.calls.append("acquire")

    async def aacquire(self, limit: str, permits: int, timeout: Any) -> None:
        self.calls.append("aacquire")

    def try_acquire(self, limit: str, permits: int, max_wait: float) -> object:
        self.calls.append("try_acquire")
        return object()

    async def atry_acquire(self, limit: str, permits: int, max_wait: float) -> object:
        self.calls.append("atry_acquire")
        return object()


class ThrottleDetectionTest(unittest.TestCase):
    def test_callable_object_with_async_call(self) -> None:
        class Handler:
            async def __call__(self, x: int) -> int:
                await asyncio.sleep(0)
                return x * 2

        for mode in ("block", "skip"):
            fake = FakeClient()
            f = permitd.throttle("api", client=fake, mode=mode)(Handler())  # type: ignore[arg-type]
            self.assertTrue(inspect.iscoroutinefunction(f), mode)
            self.assertEqual(asyncio.run(f(21)), 42)
            self.assertEqual(fake.calls, ["aacquire" if mode == "block" else "atry_acquire"])

    def test_partial_of_async_def(self) -> None:
        async def add(a: int, b: int) -> int:
            return a + b

        fake = FakeClient()
        f = permitd.throttle("api", client=fake)(functools.partial(add, 1))  # type: ignore[arg-type]
        self.assertTrue(inspect.iscoroutinefunction(f))
        self.assertEqual(asyncio.run(f(2)), 3)
        self.assertEqual(fake.calls, ["aacquire"])

    def test_plain_function_returning_a_coroutine_is_refused(self) -> None:
        async def work() -> str:
            return "done"

        def wrapper() -> Any:  # not async def: the throttle cannot see it
            return work()

        fake = FakeClient()
        f = permitd.throttle("api", client=fake)(wrapper)  # type: ignore[arg-type]
        self.assertFalse(inspect.iscoroutinefunction(f))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with self.assertRaises(TypeError) as cm:
                f()
            gc.collect()
        self.assertIn("returned an awaitable", str(cm.exception))
        self.assertIn("async def", str(cm.exception))
        self.assertEqual([w for w in caught if "never awaited" in str(w.message)], [])

    def test_plain_functions_and_classes_stay_synchronous(self) -> None:
        class Sync:
            def __call__(self) -> str:
                return "sync"

        fake = FakeClient()
        f = permitd.throttle("api", client=fake)(Sync())  # type: ignore[arg-type]
        self.assertFalse(inspect.iscoroutinefunction(f))
        self.assertEqual(f(), "sync")
        g = permitd.throttle("api", client=fake)(lambda: 7)  # type: ignore[arg-type]
        self.assertEqual(g(), 7)
        self.assertEqual(fake.calls, ["acquire", "acquire"])


class GoDurationTest(unittest.TestCase):
    def test_parse(self) -> None:
        from permitd._client import parse_go_duration

        for text, want in (("2s", 2.0), ("1m30s", 90.0), ("1.5s", 1.5), ("250ms", 0.25), ("0s", 0.0), ("1h0m0s", 3600.0), ("1.5µs", 1.5e-6)):
            got = parse_go_duration(text)
            self.assertIsNotNone(got, text)
            self.assertAlmostEqual(got, want, places=9, msg=text)  # type: ignore[arg-type]
        for bad in ("", "x", "10", "2 s", "-1s"):
            self.assertIsNone(parse_go_duration(bad), bad)


if __name__ == "__main__":
    unittest.main()


class LongWaitTest(unittest.TestCase):
    """Waits as long as the register may name (up to 2**63-1 ns, 292
    years: a grant's wait, a refusal's retry_after) sleep in bounded
    steps: one time.sleep or asyncio.sleep of them raised OverflowError
    (past the platform's time_t) instead of waiting."""

    WAIT = (2**63 - 1) / 1e9

    class Stop(Exception):
        pass

    def first_sleep(self, run: Any, target: str) -> float:
        """Runs run() with target (time.sleep or asyncio.sleep) replaced by
        one that records its argument and stops the wait."""
        from unittest import mock

        calls: List[float] = []

        def fake(d: float) -> None:
            calls.append(d)
            raise self.Stop()

        async def afake(d: float) -> None:
            fake(d)

        with mock.patch(target, afake if target.startswith("asyncio") else fake):
            with self.assertRaises(self.Stop):
                run()
        self.assertEqual(len(calls), 1)
        return calls[0]

    def grant(self) -> "permitd.Grant":
        return permitd.Grant(granted=True, limit="x", permits=1, wait=self.WAIT, received_at=time.monotonic())

    def test_grant_sleep(self) -> None:
        d = self.first_sleep(lambda: self.grant().sleep(), "time.sleep")
        self.assertGreater(d, 0)
        self.assertLessEqual(d, 86400)

    def test_grant_asleep(self) -> None:
        d = self.first_sleep(lambda: asyncio.run(self.grant().asleep()), "asyncio.sleep")
        self.assertGreater(d, 0)
        self.assertLessEqual(d, 86400)

    def test_refusal_backoff_sleep(self) -> None:
        # An acquire without a timeout refused with a retry_after of 292
        # years sleeps until then, a day at a time.
        refused = permitd.Grant(granted=False, limit="x", permits=1, retry_after=self.WAIT, received_at=time.monotonic())
        c = permitd.Client(servers="127.0.0.1:1")
        self.addCleanup(c.close)
        c._reserve = lambda *a, **k: refused  # type: ignore[method-assign]
        d = self.first_sleep(lambda: c.acquire("x"), "time.sleep")
        self.assertGreater(d, 0)
        self.assertLessEqual(d, 86400)
