"""Spacing through a leader kill: throttled callers keep going while the
leader of a 3-node register is killed with SIGKILL."""

from __future__ import annotations

import math
import statistics
import threading
import time
import unittest
from typing import List

import harness
import permitd
import workload


class LeaderKillTest(unittest.TestCase):
    I = 0.150  # one permit every 150 ms
    E = 0.050  # usable until 50 ms after its slot (more than the register's round trip)
    # From the client's expiry check to the function's clock read: a
    # preemption at worst, within one scheduling period (see EPS in
    # test_client.ClientTest).
    EPS = 0.030

    def setUp(self) -> None:
        self.procs = harness.Procs("failover")
        self.addCleanup(self.procs.close)
        self.cluster = harness.Cluster(self.procs).start()

    def test_spacing_and_service_through_a_leader_kill(self) -> None:
        leader = self.cluster.wait_ready()
        # The leader first: the client's requests go to it until it dies.
        servers = [self.cluster.agent(leader).http_addr] + [a.http_addr for a in self.cluster.agents if a.id != leader]
        client = workload.RecordingClient(servers=servers)
        self.addCleanup(client.close)
        name = "kill"
        client.put_limit(name, "strict", 1, self.I, max_reserved=8, expiry=self.E)

        uses: List[workload.Use] = []
        errors: List[str] = []
        lock = threading.Lock()
        stop = threading.Event()

        @permitd.throttle(name, client=client, timeout=10)
        def use(who: str) -> None:
            u = workload.record(who)
            with lock:
                uses.append(u)

        def caller(who: str) -> None:
            for _ in range(200):
                if stop.is_set():
                    return
                try:
                    use(who)
                except permitd.Expired:
                    continue  # descheduled past the expiry: not used, as it must
                except Exception as e:  # noqa: BLE001
                    with lock:
                        errors.append("%s: %r" % (who, e))
                    return

        threads = [threading.Thread(target=caller, args=("t%d" % i,)) for i in range(4)]
        for t in threads:
            t.start()
        try:
            harness.wait_until(lambda: len(uses) >= 10, 10, "10 uses before the kill")
            killed_at = time.monotonic()
            self.cluster.kill(leader)
            harness.wait_until(lambda: sum(u[1] > killed_at for u in uses) >= 10 or errors, 20, "10 uses after the kill")
        finally:
            stop.set()
            for t in threads:
                t.join(15)
        self.assertEqual(errors, [])
        new_leader = self.cluster.wait_ready()
        self.assertNotEqual(new_leader, leader)
        # Each use with no slack: after its ready time, after a check that
        # found it unexpired (see test_client.assert_uses_in_window).
        for who, t, ready, exp, chk in uses:
            self.assertFalse(math.isnan(chk), who)
            self.assertLessEqual(ready, t, "%s used a permit before its ready time" % who)
            self.assertLessEqual(chk, exp, "%s's permit was checked after its expiry" % who)
        ts = sorted(u[1] for u in uses)
        g = harness.gaps(ts)
        bound = self.I - self.E - self.EPS
        self.assertGreaterEqual(min(g), bound, "uses %.1f ms apart, the limit allows %.1f" % (min(g) * 1e3, bound * 1e3))
        after = [t for t in ts if t > killed_at]
        self.assertGreaterEqual(len(after), 10)
        near = [b - a for a, b in zip(ts, ts[1:]) if abs(a - killed_at) < 1 or abs(b - killed_at) < 1]
        print(
            "\n    leader kill: %d uses (%d after), gaps ms: min %.1f, median %.1f, max %.1f (the election); min within 1 s of the kill %.1f"
            % (len(ts), len(after), min(g) * 1e3, statistics.median(g) * 1e3, max(g) * 1e3, min(near) * 1e3)
        )


if __name__ == "__main__":
    unittest.main()
