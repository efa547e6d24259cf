"""The client against a real 3-node register (and a worker sidecar), started
from PERMITD_BIN for this module."""

from __future__ import annotations

import asyncio
import math
import multiprocessing
import os
import statistics
import threading
import time
import unittest
from typing import List, Optional, Union

import harness
import permitd
import proxy
import workload

_procs: Optional[harness.Procs] = None
_cluster: Optional[harness.Cluster] = None


def setUpModule() -> None:
    global _procs, _cluster
    harness.require_binary()
    _procs = harness.Procs("main")
    unittest.addModuleCleanup(_procs.close)
    _cluster = harness.Cluster(_procs).start()


def cluster() -> harness.Cluster:
    assert _cluster is not None
    return _cluster


_names = iter(range(1, 1 << 30))


def fresh_limit(client: permitd.Client, prefix: str, algorithm: str = "strict", rate: float = 10, per: Union[str, float] = "1s", **options: object) -> str:
    """Creates a new limit (a name no other test uses)."""
    name = "%s-%d-%d" % (prefix, os.getpid(), next(_names))
    client.put_limit(name, algorithm, rate, per, **options)
    return name


def spacing_report(ts: List[float], uses: Optional[List[workload.Use]] = None) -> str:
    g = sorted(harness.gaps(ts))
    if not g:
        return "no gaps"
    text = "%d uses, gaps ms: min %.1f, p5 %.1f, median %.1f, max %.1f" % (
        len(ts),
        g[0] * 1e3,
        g[len(g) // 20] * 1e3,
        statistics.median(g) * 1e3,
        g[-1] * 1e3,
    )
    if uses:
        lag = [u[1] - u[4] for u in uses if not math.isnan(u[4])]
        if lag:
            text += "; expiry check to use ms: median %.3f, max %.3f" % (statistics.median(lag) * 1e3, max(lag) * 1e3)
    return text


def assert_uses_in_window(test: unittest.TestCase, uses: List[workload.Use], what: str) -> None:
    """Every use, with no slack: at or after its grant's ready time (the
    wait was slept), and after an expiry check that found the permit
    unexpired (checked_at <= expires_at), all on one monotonic clock."""
    test.assertTrue(uses, "%s: no uses" % what)
    for who, t, ready, exp, chk in uses:
        test.assertFalse(math.isnan(chk), "%s: %s used a permit the client never checked for expiry" % (what, who))
        test.assertLessEqual(ready, t, "%s: %s used a permit %.3f ms before its ready time" % (what, who, (ready - t) * 1e3))
        test.assertLessEqual(chk, exp, "%s: %s's permit was checked %.3f ms after its expiry" % (what, who, (chk - exp) * 1e3))
        test.assertLessEqual(chk, t, "%s: %s's check came after the use" % (what, who))


class ClientTest(unittest.TestCase):
    # A strict limit for the spacing tests: one permit every I, usable
    # until E after its slot. E must exceed the register's round trip
    # (its commits' fsyncs included): the client counts the expiry from
    # the request's sending and the wait from the answer's receipt, so a
    # grant is usable for E minus the round trip only. 50 ms leaves room
    # for a disk slowed by other work; 20 ms did not. A use is at or after its slot (the wait counts
    # from the answer's receipt, never before its departure: checked per
    # use, with no slack, by assert_uses_in_window) and the client's expiry
    # check (counted from the request's sending) comes at most E after it,
    # so the checks of two uses are at least I - E apart.
    #
    # The uses themselves come EPS later than the checks at most. EPS is
    # the time from the expiry check to the function's own clock read: the
    # return through the decorator, tens of microseconds, unless the thread
    # is preempted in between. A preempted runnable thread gets the CPU
    # back once the other runnable tasks have had their slices: 1.5 ms each
    # with Linux's EEVDF on 2 CPUs (0.75 ms x (1 + log2 CPUs)), within a
    # 12 ms period with CFS before Linux 6.6. On a 2-core machine running
    # two busy loops besides this test's 2 processes and 7 callers (most
    # of them asleep at any time), that is about 10 ms at worst; 30 ms is
    # three times it. The largest check-to-use delay measured is printed
    # with the spacing ("expiry check to use"): at most 1.3 ms in our runs,
    # idle, with two or four busy loops, and with a disk writer besides.
    I = 0.150
    E = 0.050
    EPS = 0.030

    def setUp(self) -> None:
        self.client = permitd.Client(servers=cluster().servers)
        self.addCleanup(self.client.close)

    def strict_limit(self, prefix: str, max_reserved: int = 8) -> str:
        return fresh_limit(self.client, prefix, "strict", 1, self.I, max_reserved=max_reserved, expiry=self.E)

    def assert_spaced(self, ts: List[float], what: str, uses: Optional[List[workload.Use]] = None) -> None:
        bound = self.I - self.E - self.EPS
        g = harness.gaps(ts)
        self.assertTrue(g, "%s: fewer than 2 uses" % what)
        self.assertGreaterEqual(
            min(g),
            bound,
            "%s: two uses %.1f ms apart; the limit allows no less than %.1f ms (I - E - EPS); %s"
            % (what, min(g) * 1e3, bound * 1e3, spacing_report(ts, uses)),
        )

    # -- reserve, grants, errors ------------------------------------------

    def test_reserve_grant_and_refusal(self) -> None:
        name = fresh_limit(self.client, "g", "strict", 10, "1s", max_reserved=1, expiry=0.05)
        g = self.client.reserve(name)
        self.assertTrue(g.granted, g)
        self.assertEqual(len(g.request_id), 32)
        int(g.request_id, 16)
        self.assertAlmostEqual(g.spacing, 0.1, places=6)
        self.assertIsNotNone(g.expires_in)
        self.assertLessEqual(g.expires_in, 0.05)
        self.assertLessEqual(g.sent_at, g.received_at)
        self.assertIn(g.server, self.client.servers)
        self.assertFalse(g.duplicate)
        # The next slot is not free now.
        r = self.client.reserve(name)
        self.assertFalse(r.granted)
        self.assertFalse(r)
        self.assertGreater(r.retry_after, 0)
        self.assertLessEqual(r.retry_after, 0.1)
        self.assertIn("no permit within max_wait", r.error)
        self.assertNotEqual(r.request_id, g.request_id)
        with self.assertRaises(permitd.Throttled):
            r.sleep()
        # With a max_wait the same request is granted, to be used later.
        w = self.client.reserve(name, max_wait=1)
        self.assertTrue(w.granted)
        self.assertGreater(w.wait, 0)
        w.sleep()
        self.assertGreaterEqual(time.monotonic(), w.ready_at())
        v = self.client.get_limit(name)
        self.assertEqual((v["granted_requests"], v["refused_requests"]), (2, 1))

    def test_errors_carry_the_server_text(self) -> None:
        name = fresh_limit(self.client, "err")
        with self.assertRaises(permitd.NotFound) as cm:
            self.client.reserve(name + "x")
        e = cm.exception
        self.assertIsInstance(e, permitd.PermitdError)
        self.assertEqual(e.status, 404)
        self.assertIn("not found", e.error)
        self.assertIn("did you mean", e.error)
        self.assertIn(e.error, str(e))
        with self.assertRaises(permitd.InvalidRequest) as cm2:
            self.client.reserve(name, permits=10**9)
        self.assertEqual(cm2.exception.status, 400)
        self.assertIn("can grant at most", cm2.exception.error)
        # Refused before sending.
        for bad in (dict(permits=0), dict(permits=1.5), dict(max_wait=-1), dict(request_id="has space")):
            with self.assertRaises(permitd.InvalidRequest, msg=str(bad)) as cm3:
                self.client.reserve(name, **bad)
            self.assertIsNone(cm3.exception.status)
        with self.assertRaises(permitd.InvalidRequest):
            permitd.throttle(name, client=self.client, mode="sometimes")
        # A refused acquire ends with Throttled carrying the last refusal.
        hold = fresh_limit(self.client, "hold", "strict", 1, "1m", max_reserved=0)
        self.client.acquire(hold)
        t0 = time.monotonic()
        with self.assertRaises(permitd.Throttled) as cm4:
            self.client.acquire(hold, timeout=0.3)
        self.assertLess(time.monotonic() - t0, 2.0)
        self.assertEqual(cm4.exception.limit, hold)
        self.assertIn("no permit within max_wait", cm4.exception.error)
        self.assertGreater(cm4.exception.retry_after, 0)

    def test_unavailable_when_no_server_answers(self) -> None:
        ports = harness.free_ports(2)
        c = permitd.Client(servers=["127.0.0.1:%d" % p for p in ports], rounds=2, backoff_base=0.01, backoff_max=0.02, timeout=1)
        self.addCleanup(c.close)
        with self.assertRaises(permitd.Unavailable) as cm:
            c.reserve("api")
        self.assertTrue(cm.exception.not_delivered)
        self.assertIn("4 attempts over 2 servers", str(cm.exception))
        self.assertIn("refused", cm.exception.last_failure.lower())

    def test_a_raft_port_is_named(self) -> None:
        # --servers given a node's raft port: the port resets the plain
        # request, and the error says to give the HTTP address instead.
        raft = cluster().agents[0].raft_addr
        c = permitd.Client(servers=[raft], rounds=1, timeout=5)
        self.addCleanup(c.close)
        with self.assertRaises(permitd.Unavailable) as cm:
            c.reserve("api")
        self.assertIn("1 attempt over 1 server;", str(cm.exception))
        self.assertIn("%s reset the connection without an HTTP answer, as a node's raft port does" % raft, str(cm.exception))
        self.assertIn("--http-addr", str(cm.exception))

    def test_failover_skips_a_dead_server(self) -> None:
        dead = "127.0.0.1:%d" % harness.free_ports(1)[0]
        c = permitd.Client(servers=[dead] + cluster().servers)
        self.addCleanup(c.close)
        name = fresh_limit(self.client, "fo", "bursty", 1000, "1s")
        for _ in range(3):
            self.assertTrue(c.reserve(name).granted)
        self.assertNotEqual(c.reserve(name).server, "http://" + dead)

    def test_client_used_after_fork(self) -> None:
        # A child forked after the parent used the client (pooled
        # connections, maybe a lock held by another thread) reserves on
        # its own connections.
        if "fork" not in multiprocessing.get_all_start_methods():
            self.skipTest("no fork on this platform")
        name = fresh_limit(self.client, "fork", "bursty", 1000, "1s")
        self.assertTrue(self.client.reserve(name).granted)
        ctx = multiprocessing.get_context("fork")
        out = ctx.Queue()
        child = ctx.Process(target=workload.reserve_in_child, args=(self.client, name, out), daemon=True)
        child.start()
        self.addCleanup(child.join, 5)
        self.addCleanup(child.kill)
        got = out.get(timeout=20)
        self.assertEqual(got, [True, True], got)
        self.assertTrue(self.client.reserve(name).granted)
        self.assertEqual(self.client.get_limit(name)["granted_requests"], 4)

    # -- a lost answer is retried with the same request ID -------------------

    def lost_answer(self, mode: str, timeout: float) -> None:
        # The replay must come before the permit's expiry (else it is
        # answered as a refusal, never as a late grant): 2 s here.
        name = fresh_limit(self.client, "lost-" + mode, "strict", 10, "1s", max_reserved=4, expiry=2)
        target = cluster().servers[0]
        p = proxy.LossyProxy(target)
        self.addCleanup(p.close)
        c = permitd.Client(servers=[p.addr, target], timeout=timeout)
        self.addCleanup(c.close)
        p.lose(1, mode)
        g = c.reserve(name, max_wait=1)
        self.assertTrue(g.granted, g)
        self.assertTrue(g.duplicate, "the retry was decided anew: %r" % g)
        self.assertEqual(g.server, "http://" + target)
        lost = [x for x in p.exchanges if x.mode == mode]
        self.assertEqual(len(lost), 1, [(x.mode, x.path) for x in p.exchanges])
        self.assertIn(('"request_id":"%s"' % g.request_id).encode(), lost[0].body)
        self.assertEqual(lost[0].status, 200)
        self.assertIn(b'"granted":true', lost[0].answer)
        v = self.client.get_limit(name)
        self.assertEqual((v["granted_requests"], v["granted_permits"]), (1, 1), v)
        # The next reserve is a new request: a new ID, a new grant.
        g2 = c.reserve(name, max_wait=1)
        self.assertTrue(g2.granted and not g2.duplicate)
        self.assertNotEqual(g2.request_id, g.request_id)
        self.assertEqual(self.client.get_limit(name)["granted_requests"], 2)

    def test_dropped_answer_is_granted_once(self) -> None:
        self.lost_answer("drop", timeout=5)

    def test_timed_out_answer_is_granted_once(self) -> None:
        self.lost_answer("hold", timeout=0.5)

    def test_async_reserve_never_blocks_the_event_loop(self) -> None:
        # The first server holds the answer until the client's 0.5 s
        # timeout; the retry on the second is answered. A blocking call in
        # the loop would delay a 5 ms sleep by about 0.5 s.
        name = fresh_limit(self.client, "loop", "strict", 10, "1s", max_reserved=4, expiry=2)
        target = cluster().servers[0]
        p = proxy.LossyProxy(target)
        self.addCleanup(p.close)
        c = permitd.Client(servers=[p.addr, target], timeout=0.5)
        self.addCleanup(c.close)
        p.lose(1, "hold")
        lag: dict = {}

        async def run() -> permitd.Grant:
            t0 = time.monotonic()
            probe = workload.loop_lag_probe(t0 + 0.8, lag)
            g = await c.areserve(name, max_wait=1)
            await c.aacquire(name, timeout=2)
            await probe
            return g

        g = asyncio.run(run())
        self.assertTrue(g.granted and g.duplicate, g)
        self.assertLess(lag["worst_lag"], 0.35, "the event loop stalled %.0f ms" % (lag["worst_lag"] * 1e3))

    # -- spacing ---------------------------------------------------------------

    def test_spacing_threads_processes_and_tasks_together(self) -> None:
        name = self.strict_limit("mix")
        servers = cluster().servers
        rc = workload.RecordingClient(servers=servers)
        self.addCleanup(rc.close)
        duration, max_calls = 3.0, 40
        ctx = multiprocessing.get_context("spawn")
        ready, start, out = ctx.Queue(), ctx.Event(), ctx.Queue()
        children = [
            ctx.Process(target=workload.process_main, args=(servers, name, "p%d" % i, 2, duration, max_calls, ready, start, out), daemon=True)
            for i in range(2)
        ]
        for ch in children:
            ch.start()
            self.addCleanup(ch.join, 5)
            self.addCleanup(ch.kill)
        for _ in children:
            ready.get(timeout=30)
        start.set()
        end = time.monotonic() + duration
        results: List = []
        main_threads = threading.Thread(
            target=lambda: results.append(workload.thread_callers(rc, name, "main", 2, end, max_calls))
        )
        main_threads.start()

        lag: dict = {}

        async def tasks():
            probe = workload.loop_lag_probe(end, lag)
            r = await workload.task_callers(rc, name, "main", 3, end, max_calls)
            await probe
            return r

        results.append(asyncio.run(tasks()))
        main_threads.join(duration + 20)
        for _ in children:
            tag, uses, errors = out.get(timeout=duration + 30)
            results.append((uses, errors))
        uses = [u for r in results for u in r[0]]
        errors = [e for r in results for e in r[1]]
        self.assertEqual(errors, [])
        ts = [u[1] for u in uses]
        sources = {u[0].split("-")[0] + ("-async" if "-a" in u[0] else "") for u in uses}
        self.assertEqual(sources, {"p0", "p1", "main", "main-async"}, "every kind of caller used permits")
        assert_uses_in_window(self, uses, "threads, processes and tasks")
        self.assert_spaced(ts, "threads, processes and tasks", uses)
        # Close to the limit's rate: the callers always wait for the next slot.
        self.assertGreaterEqual(len(ts), 0.4 * duration / self.I, spacing_report(ts))
        print("\n    mixed spacing: %s; event loop worst lag %.1f ms" % (spacing_report(ts, uses), lag["worst_lag"] * 1e3))

    def test_context_managers_and_each(self) -> None:
        name = self.strict_limit("ctx")
        ts: List[float] = []
        uses: List[workload.Use] = []
        for _ in range(3):
            with self.client.permit(name) as g:
                uses.append(workload.record("with", g))
                ts.append(uses[-1][1])
                self.assertTrue(g.granted)

        async def run() -> None:
            for _ in range(3):
                async with self.client.permit(name, timeout=5) as g:
                    uses.append(workload.record("async with", g))
                    ts.append(uses[-1][1])
            async for j in self.client.aacquire_each(name, 3):
                ts.append(time.monotonic())

        asyncio.run(run())
        # Several permits of a strict limit: one grant, paced per permit.
        idx = []
        for j in self.client.acquire_each(name, 3, timeout=5):
            idx.append(j)
            ts.append(time.monotonic())
        self.assertEqual(idx, [0, 1, 2])
        assert_uses_in_window(self, uses, "context managers")
        self.assert_spaced(ts, "context managers and acquire_each", uses)
        # ... and never together.
        with self.assertRaises(permitd.SpacedGrant):
            self.client.acquire(name, 2)
        for _ in range(5):  # a grant (a refusal would raise Throttled)
            g = self.client.reserve(name, 2, max_wait=5)
            if g.granted:
                break
        self.assertTrue(g.granted, g)
        with self.assertRaises(permitd.SpacedGrant):
            g.sleep()

    def test_skip_mode(self) -> None:
        # One permit a second, expiring after half of it (the default);
        # with max_wait 0 only a slot free now is granted. The five calls
        # back to back need only the second to come within the second (a
        # reserve takes milliseconds, tens on a loaded machine).
        name = fresh_limit(self.client, "skip", "strict", 1, "1s", max_reserved=1)
        ran: List[float] = []

        @permitd.throttle(name, client=self.client, mode="skip")
        def now(x: int) -> int:
            ran.append(time.monotonic())
            return x

        results = [now(i) for i in range(5)]  # back to back
        self.assertEqual(results[0], 0)
        self.assertIn(None, results)
        self.assertEqual(len(ran), sum(r is not None for r in results), "a skipped call ran its function")

        @permitd.throttle(name, client=self.client, mode="skip", max_wait=1.5)
        def patient() -> str:
            ran.append(time.monotonic())
            return "ran"

        self.assertEqual(patient(), "ran")  # waits for the next slot

        @permitd.throttle(name, client=self.client, mode="skip")
        async def anow() -> str:
            ran.append(time.monotonic())
            return "ran"

        @permitd.throttle(name, client=self.client, mode="skip", max_wait=1.5)
        async def apatient() -> str:
            ran.append(time.monotonic())
            return "ran"

        async def run() -> list:
            return [await anow() for _ in range(3)] + [await apatient()]

        got = asyncio.run(run())
        self.assertEqual(got[-1], "ran")
        self.assertIn(None, got)
        ran_before = sum(r is not None for r in results) + 1
        self.assertEqual(len(ran), ran_before + got.count("ran"))
        self.assertGreaterEqual(min(harness.gaps(ran)), 1.0 - 0.5 - self.EPS)  # I - E - EPS

    # -- a worker sidecar ----------------------------------------------------------

    # A leased limit's bound (README, "Bound"): in any window of real time
    # of length W the fleet spends at most C + O + floor(W / I) + 1 permits.
    # The test sees uses, which come after the sidecar handed the permits
    # out by the answer's trip and the caller's wake-up: the uses in a
    # window of length W were handed out within W + SLACK, SLACK being the
    # same 30 ms as EPS above (one scheduling period, twice over). SLACK
    # must stay below I.
    SIDECAR_SLACK = 0.030

    def test_sidecar(self) -> None:
        rate, C, O = 20, 5, 10
        I = 1.0 / rate
        name = fresh_limit(self.client, "leased", "strict", rate, "1s")
        self.client.set_lease_policy(name, True, burst_permits=C, max_outstanding_permits=O)
        with self.assertRaises(permitd.InvalidRequest) as cm:
            self.client.reserve(name)
        self.assertIn("leased", cm.exception.error)
        assert _procs is not None
        # Renewing every 200 ms, the worker reaches the full rate with these
        # small C and O (min(1, min(C, O) * I / P), README "Bound").
        sc = harness.Sidecar(_procs, cluster(), name, extra=["--renew-every", "200ms"])
        sc.wait_ready()
        c = permitd.Client(servers=[sc.http_addr])
        self.addCleanup(c.close)
        g = c.reserve(name, max_wait=2)
        self.assertTrue(g.granted, g)
        self.assertEqual(g.wait, 0)
        self.assertIsNone(g.expires_in)
        with self.assertRaises(permitd.NotFound) as nf:
            c.reserve(name + "-other")
        self.assertIn("serves only limit", nf.exception.error)
        uses: List[float] = []
        errors: List[str] = []
        lock = threading.Lock()

        @c.throttle(name, timeout=10)
        def use() -> None:
            t = time.monotonic()
            with lock:
                uses.append(t)

        def caller() -> None:
            try:
                for _ in range(20):
                    use()
            except Exception as e:  # noqa: BLE001
                with lock:
                    errors.append(repr(e))

        threads = [threading.Thread(target=caller) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        self.assertEqual(errors, [])
        self.assertEqual(len(uses), 60)
        # Every window: the most uses in a half-open window of length
        # (m + 1) * I - SLACK (their span is shorter, so the bound's
        # floor((span + SLACK) / I) is at most m) is at most C + O + m + 1.
        span = max(uses) - min(uses)
        worst = ""
        m = 0
        while True:
            w = (m + 1) * I - self.SIDECAR_SLACK
            n = harness.max_in_window(uses, w)
            bound = C + O + m + 1
            self.assertLessEqual(
                n, bound, "%d uses within %.1f ms; a leased limit allows at most C + O + floor((W + slack) / I) + 1 = %d" % (n, w * 1e3, bound)
            )
            if not worst or n - bound > worst[0]:
                worst = (n - bound, n, bound, w)
            if w > span:
                break
            m += 1
        print(
            "\n    sidecar: 60 uses over %.2f s; least headroom under the bound: %d (%d uses within %.0f ms, bound %d)"
            % (span, -worst[0], worst[1], worst[3] * 1e3, worst[2])
        )

        @c.throttle(name, mode="skip", max_wait=0.5)
        async def skip() -> bool:
            return True

        async def skips() -> list:
            return await asyncio.wait_for(asyncio.gather(*(skip() for _ in range(4))), 10)

        got = asyncio.run(skips())
        self.assertIn(True, got)
        self.assertTrue(all(x in (True, None) for x in got))

    def test_sidecar_with_a_smaller_max_reserve_wait(self) -> None:
        # acquire asks up to default_max_wait (10 s); this sidecar allows
        # 1 s and answers a longer max_wait with a 400 that names its cap:
        # the client retries once with the cap and remembers it for that
        # server.
        name = fresh_limit(self.client, "leased-cap", "strict", 50, "1s")
        self.client.set_lease_policy(name, True)
        assert _procs is not None
        sc = harness.Sidecar(_procs, cluster(), name, name="w-cap", extra=["--max-reserve-wait", "1s"])
        sc.wait_ready()
        c = permitd.Client(servers=[sc.http_addr])
        self.addCleanup(c.close)

        def invalid() -> float:
            return harness.metric(sc.http_addr, "permitd_sidecar_reserves_total", 'outcome="invalid"')

        # An explicit reserve's max_wait is the caller's: above the cap it
        # is an error, with the sidecar's text.
        with self.assertRaises(permitd.InvalidRequest) as cm:
            c.reserve(name, max_wait=2)
        self.assertIn("at most 1s", cm.exception.error)
        self.assertEqual(invalid(), 1)
        g = c.acquire(name, timeout=5)
        self.assertTrue(g.granted)
        self.assertEqual(invalid(), 2)  # the first attempt, answered with the cap
        c.acquire(name)  # default_max_wait: the cap is remembered
        asyncio.run(c.aacquire(name, timeout=3))

        @c.throttle(name)
        def use() -> str:
            return "ran"

        self.assertEqual(use(), "ran")
        self.assertEqual(invalid(), 2)

    # -- expiry -----------------------------------------------------------------

    def test_expired_permit_is_never_used(self) -> None:
        # The answer reaches the client after the permit it grants expired
        # (a proxy holds it 0.6 s; the permit expires 0.25 s after its slot,
        # far more than the register's round trip, and the client's timeout
        # is 5 s): sleep() must raise Expired, and acquire must reserve
        # again rather than use it.
        name = fresh_limit(self.client, "exp", "strict", 2, "1s", max_reserved=4, expiry=0.25)
        p = proxy.LossyProxy(cluster().servers[0])
        self.addCleanup(p.close)
        c = permitd.Client(servers=[p.addr], timeout=5)
        self.addCleanup(c.close)
        p.lose(1, "delay", delay=0.6)
        g = c.reserve(name)
        self.assertTrue(g.granted, g)
        self.assertGreater(g.received_at, g.expires_at())
        self.assertFalse(g.usable_now())
        with self.assertRaises(permitd.Expired) as cm:
            g.sleep()
        self.assertIn("expired", str(cm.exception))
        self.assertIsNone(g.checked_at)
        with self.assertRaises(permitd.Expired):
            asyncio.run(g.asleep())
        self.assertEqual(self.client.get_limit(name)["granted_requests"], 1)

        p.lose(1, "delay", delay=0.6)
        g2 = c.acquire(name, timeout=5)
        self.assertTrue(g2.granted)
        self.assertIsNotNone(g2.checked_at)
        self.assertLessEqual(g2.checked_at, g2.expires_at())
        reserves = [x for x in p.exchanges if x.path.endswith("/reserve")]
        modes = [x.mode for x in reserves]
        # The delayed grant was not used: acquire reserved again (once, or
        # more should the register be slower than the expiry) and used a
        # grant that came straight through.
        self.assertEqual(modes[:3], ["delay", "delay", "forward"], modes)
        used = [x for x in reserves if ('"request_id":"%s"' % g2.request_id).encode() in x.body]
        self.assertEqual([x.mode for x in used], ["forward"], modes)
        v = self.client.get_limit(name)
        self.assertEqual(v["granted_requests"], len(reserves), v)
        self.assertGreaterEqual(v["granted_requests"], 3, v)

    # -- refusals -----------------------------------------------------------------

    def test_refused_acquire_waits_for_retry_after(self) -> None:
        # One permit a second, none reserved ahead: a second acquire is
        # refused with retry_after ~1 s. It sleeps that out and is granted
        # on its next reserve, rather than spending request IDs on early
        # retries that cannot be granted.
        name = fresh_limit(self.client, "ra", "strict", 1, "1s", max_reserved=0)
        self.client.acquire(name)
        t0 = time.monotonic()
        g = self.client.acquire(name, timeout=5)
        took = time.monotonic() - t0
        self.assertTrue(g.granted)
        self.assertGreater(took, 0.5)
        v = self.client.get_limit(name)
        self.assertEqual(v["granted_requests"], 2, v)
        self.assertLessEqual(v["refused_requests"], 2, "%d refusals before the slot came: retries before retry_after" % v["refused_requests"])
        # A retry_after beyond the timeout: Throttled at once, not at the
        # timeout.
        hold = fresh_limit(self.client, "ra-hold", "strict", 1, "1m", max_reserved=0)
        self.client.acquire(hold)
        t0 = time.monotonic()
        with self.assertRaises(permitd.Throttled) as cm:
            self.client.acquire(hold, timeout=2)
        took = time.monotonic() - t0
        self.assertLess(took, 0.5, "gave up after %.3fs, not at once" % took)
        self.assertGreater(cm.exception.retry_after, 2)
        self.assertEqual(self.client.get_limit(hold)["refused_requests"], 1)


    def test_acquire_without_max_reserved_is_refused_once_per_grant(self) -> None:
        # 4 a second, none reserved ahead: every reserve before the next
        # slot is refused, naming the setting, whatever its max_wait; an
        # acquire waits for the slot instead of polling (25 refusals for 5
        # grants).
        name = fresh_limit(self.client, "mr0", "strict", 4, "1s", max_reserved=0)
        for _ in range(5):
            self.client.acquire(name, timeout=5)
        v = self.client.get_limit(name)
        self.assertEqual(v["granted_requests"], 5, v)
        self.assertLessEqual(v["refused_requests"], 5, "%d refusals for 5 grants: the acquires polled" % v["refused_requests"])
        for _ in range(20):
            r = self.client.reserve(name, max_wait=10)
            if not r.granted:
                break
        self.assertFalse(r.granted, "20 reserves in a row granted on a limit of 4 a second")
        self.assertIn("max_reserved is 0", r.error)
        self.assertIn("--max-reserved", r.error)


class ReservationTest(unittest.TestCase):
    """reserve_many, settle and release against the module's cluster."""

    def setUp(self) -> None:
        self.client = permitd.Client(servers=cluster().servers)
        self.addCleanup(self.client.close)

    def counters(self, name: str) -> tuple:
        v = self.client.get_limit(name)
        return (v["granted_requests"], v["granted_permits"], v["refused_requests"])

    def tokens(self, prefix: str = "tpm") -> str:
        # Guava's SmoothBursty with no store: a grant of n permits is served
        # at once and pushes the next grant n ms later.
        return fresh_limit(self.client, prefix, "bursty", 1000, "1s", max_burst_seconds=0)

    def test_grant_and_refusal_all_or_nothing(self) -> None:
        rpm = fresh_limit(self.client, "rpm", "strict", 1, "10s", max_reserved=0)
        rpm2 = fresh_limit(self.client, "rpm2", "strict", 1, "10s", max_reserved=0)
        tpm = self.tokens()
        r = self.client.reserve_many({rpm: 1, tpm: 400})
        self.assertIsInstance(r, permitd.Grant)
        self.assertTrue(r.granted, r)
        self.assertTrue(r.reservation_id.isdigit(), r)
        self.assertEqual(r.limits, {rpm: 1, tpm: 400})
        self.assertEqual(r.permits, 401)
        self.assertEqual(len(r.request_id), 32)
        self.assertFalse(r.duplicate)
        self.assertIsNone(r.blocking)
        self.assertLessEqual(r.wait, 0.05)
        self.assertIsNotNone(r.expires_in)  # rpm's slot expires
        self.assertEqual(self.counters(rpm), (1, 1, 0))
        self.assertEqual(self.counters(tpm), (1, 400, 0))
        # rpm's next slot is 10 s away: refused, naming rpm; tpm reserved
        # nothing.
        x = self.client.reserve_many([(rpm, 1), (tpm, 10)], max_wait=1)
        self.assertFalse(x.granted, x)
        self.assertFalse(x)
        self.assertEqual(x.blocking, rpm)
        self.assertEqual(x.reservation_id, "")
        self.assertGreater(x.retry_after, 5)
        self.assertIn("blocks", x.error)
        self.assertEqual(self.counters(rpm), (1, 1, 1))
        self.assertEqual(self.counters(tpm), (1, 400, 0))
        # tpm's next grant is ~0.4 s away: refused with max_wait 0.1,
        # naming tpm; rpm2, free, reserved nothing.
        y = self.client.reserve_many({rpm2: 1, tpm: 10}, max_wait=0.1)
        self.assertFalse(y.granted, y)
        self.assertEqual(y.blocking, tpm)
        self.assertGreater(y.retry_after, 0.1)
        self.assertEqual(self.counters(rpm2), (0, 0, 0))
        self.assertEqual(self.counters(tpm), (1, 400, 1))
        with self.assertRaises(permitd.Throttled) as cm:
            with y:
                self.fail("entered a refused reservation")
        self.assertEqual(cm.exception.limit, tpm)
        self.assertEqual(cm.exception.retry_after, y.retry_after)
        self.assertEqual(cm.exception.status, 429)
        # Since nothing was reserved on rpm2, its one slot is still free.
        z = self.client.reserve_many({rpm2: 1})
        self.assertTrue(z.granted, z)
        # Refused before sending.
        for bad in ({}, {rpm: 0}, {rpm: 1.5}, [(rpm, 1), (rpm, 1)], {"a%d" % i: 1 for i in range(9)}, {"has space": 1}, "rpm"):
            with self.assertRaises(permitd.InvalidRequest, msg=repr(bad)) as e:
                self.client.reserve_many(bad)  # type: ignore[arg-type]
            self.assertIsNone(e.exception.status)
        for bad_id in ("", "0", "x1", -1, "1/../2"):
            with self.assertRaises(permitd.InvalidRequest, msg=repr(bad_id)):
                self.client.release(bad_id)  # type: ignore[arg-type]
        with self.assertRaises(permitd.NotFound):
            self.client.reserve_many({rpm: 1, tpm + "-missing": 1})
        with self.assertRaises(permitd.InvalidRequest) as cm2:
            self.client.reserve_many({rpm2: 2, tpm: 1})  # strict among several: 1 permit
        self.assertEqual(cm2.exception.status, 400)

    def test_settle_refund_replay_and_conflict(self) -> None:
        tpm = self.tokens()
        r = self.client.reserve_many({tpm: 1000}, settle_within=30)
        self.assertTrue(r.granted, r)
        # The next grant is ~1 s away.
        x = self.client.reserve_many({tpm: 1}, max_wait=0.3)
        self.assertFalse(x.granted, x)
        self.assertGreater(x.retry_after, 0.3)
        s = self.client.settle(r.reservation_id, {tpm: 100}, request_id="settle-" + r.request_id)
        self.assertFalse(s.duplicate)
        self.assertEqual(s.reservation_id, r.reservation_id)
        self.assertEqual(s.limits[tpm], permitd.SettledLimit(tpm, 1000, 100, 900, 0))
        # The refund does not lower the permits granted; it is counted
        # apart, and the net figure is what the limit was charged.
        v = self.client.get_limit(tpm)
        self.assertEqual((v["granted_permits"], v["refunded_permits"], v["net_permits"]), (1000, 900, 100), v)
        # The refund is visible: the same reserve is now granted within 0.3 s.
        y = self.client.reserve_many({tpm: 1}, max_wait=0.3)
        self.assertTrue(y.granted, y)
        self.assertLess(y.wait, 0.3)
        # A retry of the settlement (same request ID) replays it.
        s2 = self.client.settle(int(r.reservation_id), [(tpm, 100)], request_id="settle-" + r.request_id)
        self.assertTrue(s2.duplicate)
        self.assertEqual(s2.limits, s.limits)
        # Another settlement of it is a conflict.
        with self.assertRaises(permitd.Conflict) as cm:
            self.client.settle(r.reservation_id, {tpm: 50})
        self.assertEqual(cm.exception.status, 409)
        self.assertIn("already settled", cm.exception.error)
        # Errors of the register.
        with self.assertRaises(permitd.InvalidRequest):
            self.client.settle(y.reservation_id, {tpm + "-other": 1})
        with self.assertRaises(permitd.NotFound):
            self.client.settle(10**15, {})
        with self.assertRaises(permitd.InvalidRequest):
            self.client.settle(y.reservation_id, {tpm: -1})
        # An overrun is charged as debt.
        s3 = asyncio.run(self.client.asettle(y.reservation_id, {tpm: 5}))
        self.assertEqual((s3.limits[tpm].charged, s3.limits[tpm].refunded), (4, 0))

    def test_context_manager_releases_in_flight_permits(self) -> None:
        gpu = "gpu-%d-%d" % (os.getpid(), next(_names))
        v = self.client.put_limit(gpu, "concurrency", max_in_flight=1, ttl=60)
        self.assertEqual((v["algorithm"], v["ttl"]), ("concurrency", "1m0s"))
        tpm = self.tokens()
        with self.client.reserve_many({gpu: 1, tpm: 200}, max_wait=2) as r:
            self.assertTrue(r.usable_now() or r.wait == 0)
            # The hold lapses at most its TTL after the request was sent.
            self.assertIsNotNone(r.hold_expires_in)
            self.assertGreater(r.hold_expires_at(), time.monotonic() + 30)
            self.assertLessEqual(r.hold_expires_at(), r.received_at + 60)
            other = self.client.reserve_many({gpu: 1})
            self.assertFalse(other.granted)
            self.assertEqual(other.blocking, gpu)
            self.assertGreater(other.retry_after, 30)  # the hold's TTL
            with self.assertRaises(permitd.Throttled) as cm:
                with self.client.reserve_many({gpu: 1}):
                    self.fail("entered while the cap is held")
            self.assertEqual(cm.exception.limit, gpu)
            st = r.settle(**{tpm: 150})  # r.settle(tpm=150) for a limit named tpm
            self.assertEqual(st.limits[tpm].refunded, 50)
            self.assertEqual(st.limits[gpu].refunded, 0)  # used what it reserved
        self.assertIs(r.settlement, st)
        self.assertEqual(r.released, 1)
        # Leaving released the hold: the cap is free again.
        again = self.client.reserve_many({gpu: 1})
        self.assertTrue(again.granted, again)
        self.assertEqual(self.client.release(again.reservation_id), 1)
        self.assertEqual(self.client.release(again.reservation_id), 0)  # a second release frees nothing

        async def run() -> permitd.Reservation:
            async with self.client.areserve_many({gpu: 1}, max_wait=1) as ar:
                inner = await self.client.areserve_many({gpu: 1})
                self.assertFalse(inner.granted)
                self.assertEqual(inner.blocking, gpu)
            after = await self.client.areserve_many({gpu: 1})
            self.assertTrue(after.granted, after)
            async with after:  # an awaited reservation enters too
                with self.assertRaises(permitd.Throttled) as cm:
                    async with self.client.areserve_many({gpu: 1}):
                        self.fail("entered while the cap is held")
                self.assertEqual(cm.exception.limit, gpu)
            self.assertEqual(after.released, 1)
            return ar

        ar = asyncio.run(run())
        self.assertEqual(ar.released, 1)
        self.assertIsNone(ar.settlement)  # not settled: left as reserved
        # A body that raises leaves the reservation as reserved, and still
        # frees the in-flight permits.
        with self.assertRaises(ZeroDivisionError):
            with self.client.reserve_many({gpu: 1, tpm: 1}, max_wait=2) as r2:
                1 / 0
        self.assertEqual(r2.released, 1)
        self.assertTrue(self.client.reserve_many({gpu: 1}).granted)
        # A reservation of rate limits only holds nothing in flight:
        # leaving sends no release at all.
        with self.client.reserve_many({tpm: 1}, max_wait=2) as r3:
            self.assertFalse(r3.holds)
        self.assertIsNone(r3.released)
        self.assertTrue(r.holds)

    def test_limits_page_by_page(self) -> None:
        prefix = "page%d-%d:" % (os.getpid(), next(_names))
        names = sorted(prefix + "k%d" % i for i in range(5))
        for n in names:
            self.client.put_limit(n, "strict", 1, "1s")
        first, nxt = self.client.list_limits_page(prefix, limit=2)
        self.assertEqual([v["name"] for v in first], names[:2])
        self.assertEqual(nxt, names[1])
        self.assertEqual([v["name"] for v in self.client.iter_limits(prefix, page=2)], names)
        self.assertEqual(self.client.list_limits_page(prefix, after=names[-1]), ([], ""))
        with self.assertRaises(permitd.InvalidRequest) as cm:
            self.client.list_limits_page(prefix, limit=0)
        self.assertIn("allowed: an integer 1-10000", str(cm.exception))

    def test_templates_create_keys_on_first_use(self) -> None:
        prefix = "tpl%d-%d" % (os.getpid(), next(_names))
        v = self.client.put_template(prefix, "bursty", 10, "1s", idle="10m", max_keys=1, max_burst_seconds=1)
        self.assertEqual((v["prefix"], v["idle"], v["max_keys"], v["created"]), (prefix, "10m0s", 1, True), v)
        self.assertTrue(self.client.reserve(prefix + ":a").granted)
        self.assertEqual([k["name"] for k in self.client.iter_limits(prefix + ":")], [prefix + ":a"])
        # Past max_keys: a refusal naming the cap, single and of several
        # limits; nothing created.
        g = self.client.reserve(prefix + ":b")
        self.assertFalse(g.granted, g)
        self.assertTrue(g.keys_full, g)
        self.assertGreater(g.retry_after, 0)
        self.assertIn("its max keys", g.error or "")
        r = self.client.reserve_many({prefix + ":c": 1})
        self.assertTrue(r.keys_full and not r.granted, r)
        with self.assertRaises(permitd.Throttled) as cm:
            with self.client.reserve_many({prefix + ":c": 1}):
                pass
        self.assertTrue(cm.exception.keys_full)
        self.assertEqual(self.client.get_template(prefix)["live_keys"], 1)
        self.assertIn((prefix, False), [(t["prefix"], t["deleted"]) for t in self.client.list_templates()])
        with self.assertRaises(permitd.InvalidRequest) as ce:
            self.client.put_template(prefix, "strict", 1, idle=0.5, max_keys=1)
        self.assertIn('from "1s" to "720h"', str(ce.exception))
        d = self.client.delete_template(prefix)
        self.assertEqual((d["existed"], d["live_keys"]), (True, 1), d)
        with self.assertRaises(permitd.NotFound):
            self.client.get_template(prefix)
        # Deleted, its key live: listed as deleted until the key goes.
        listed = [t for t in self.client.list_templates() if t["prefix"] == prefix]
        self.assertEqual([(t["deleted"], t["live_keys"]) for t in listed], [(True, 1)], listed)

    def test_shadow_limit_grants_everything(self) -> None:
        sh = fresh_limit(self.client, "shadow", "strict", 1, "1m", max_reserved=0, shadow=True)
        tpm = self.tokens()
        for i in range(3):
            r = self.client.reserve_many({sh: 1, tpm: 1}, max_wait=0.5)
            self.assertTrue(r.granted, "reserve %d: %r" % (i, r))
            self.assertLess(r.wait, 0.5)
            s = r.settle({sh: 0})
            self.assertEqual(s.limits[sh].refunded, 0)  # a shadow limit changes nothing
        # Read from the leader: a follower forwards the read, and the
        # forwarded view (node/resultcodec.go) does not carry the shadow
        # flag nor its counters.
        leader = cluster().agent(cluster().wait_ready()).http_addr
        lc = permitd.Client(servers=[leader])
        self.addCleanup(lc.close)
        v = lc.get_limit(sh)
        self.assertTrue(v["shadow"], v)
        self.assertEqual((v["granted_requests"], v["refused_requests"]), (3, 0), v)
        self.assertEqual(v["shadow_would_refuse"], 2, v)

    def test_lost_answer_is_reserved_once(self) -> None:
        rpm = fresh_limit(self.client, "lost-rpm", "strict", 1, "10s", max_reserved=0)
        tpm = self.tokens()
        target = cluster().servers[0]
        p = proxy.LossyProxy(target)
        self.addCleanup(p.close)
        c = permitd.Client(servers=[p.addr, target], timeout=5)
        self.addCleanup(c.close)
        p.lose(1, "drop")
        r = c.reserve_many({rpm: 1, tpm: 100}, max_wait=1)
        self.assertTrue(r.granted, r)
        self.assertTrue(r.duplicate, "the retry was decided anew: %r" % r)
        self.assertEqual(r.server, "http://" + target)
        lost = [x for x in p.exchanges if x.mode == "drop"]
        self.assertEqual(len(lost), 1, [(x.mode, x.path) for x in p.exchanges])
        self.assertEqual(lost[0].path, "/v1/reserve")
        self.assertIn(('"request_id":"%s"' % r.request_id).encode(), lost[0].body)
        self.assertIn(('"reservation_id":"%s"' % r.reservation_id).encode(), lost[0].answer)
        self.assertEqual(self.counters(rpm), (1, 1, 0))
        self.assertEqual(self.counters(tpm), (1, 100, 0))
        # The replayed reservation is the one to settle.
        self.assertEqual(r.settle({tpm: 10}).limits[tpm].refunded, 90)

    def test_expired_reservation_is_settled_unused(self) -> None:
        # The answer arrives after the grant expired (the proxy holds it
        # 0.6 s; the strict limit's permits expire 0.25 s after their
        # slot): entering raises Expired and gives the permits back.
        api = fresh_limit(self.client, "exp-api", "strict", 2, "1s", max_reserved=4, expiry=0.25)
        tpm = self.tokens()
        p = proxy.LossyProxy(cluster().servers[0])
        self.addCleanup(p.close)
        c = permitd.Client(servers=[p.addr], timeout=5)
        self.addCleanup(c.close)
        p.lose(1, "delay", delay=0.6)
        r = c.reserve_many({api: 1, tpm: 50})
        self.assertTrue(r.granted, r)
        with self.assertRaises(permitd.Expired):
            with r:
                self.fail("entered an expired reservation")
        self.assertIsNotNone(r.settlement)
        assert r.settlement is not None
        self.assertEqual(r.settlement.limits[tpm].refunded, 50)
        self.assertEqual(r.settlement.limits[api].refunded, 1)
        # The register answered a grant (the proxy held it): counted as
        # one, with its permits given back by the settlement.
        for name, permits in ((tpm, 50), (api, 1)):
            v = self.client.get_limit(name)
            self.assertEqual((v["granted_requests"], v["granted_permits"], v["refunded_permits"], v["net_permits"]), (1, permits, permits, 0), v)


if __name__ == "__main__":
    unittest.main()
