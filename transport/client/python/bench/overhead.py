#!/usr/bin/env python3
"""The permitd client's per-call overhead over a bare HTTP round trip.

Against one server of a running cluster (``--servers``, the leader is
chosen), or a throwaway 3-node cluster started from ``--permitd-bin``, it
times N reserves on a generous limit (bursty, 10^6 permits/s: every reserve
is granted at once, so nothing sleeps), each way:

* ``bare http.client``: one persistent ``http.client.HTTPConnection``, the
  same JSON body with a fresh request ID, the answer read (not parsed);
* ``Client.reserve``: the client on that one server (request ID, pooled
  connection, JSON decode, the Grant);
* ``@throttle call``: a throttled no-op function in ``"block"`` mode
  (reserve, checks, a zero sleep, the call).

Then it times the client's own work with the network left out (its
transport answers a canned grant), which the register's latency and its
noise do not blur.

The three are interleaved in blocks of 50 so that drift in the cluster's
latency (fsync, the machine's load) is shared. It prints the median, p90,
p99 and mean per call, the calling thread's CPU time per call
(:func:`time.thread_time`: the client's own work, free of the register's
latency and its noise), and the client's overhead over the bare round
trip.
This is a benchmark to run by hand, not a test::

    go build -o /tmp/permitd ./cmd/permitd
    python3 transport/client/python/bench/overhead.py --permitd-bin /tmp/permitd -n 2000
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import secrets
import statistics
import sys
import time
from typing import Callable, Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "src"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

import permitd  # noqa: E402


def find_leader(servers: List[str]) -> str:
    for s in servers:
        host, port = s.rsplit(":", 1)
        c = http.client.HTTPConnection(host, int(port), timeout=2)
        try:
            c.request("GET", "/v1/status")
            st = json.loads(c.getresponse().read())
        except (OSError, ValueError):
            continue
        finally:
            c.close()
        if st.get("state") == "leader":
            return s
    return servers[0]


def pct(xs: List[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(p * len(s)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--servers", help="host:port,... of a running cluster (the leader is used)")
    ap.add_argument("--permitd-bin", help="start a throwaway 3-node cluster from this binary instead")
    ap.add_argument("-n", type=int, default=2000, help="reserves per method (default 2000)")
    ap.add_argument("--warmup", type=int, default=200, help="untimed reserves per method first (default 200)")
    ap.add_argument("--limit", default="bench-overhead", help="limit name (created or replaced)")
    args = ap.parse_args()

    procs = None
    if args.permitd_bin:
        os.environ["PERMITD_BIN"] = args.permitd_bin
        import harness

        procs = harness.Procs("bench")
        servers = harness.Cluster(procs).start().servers
    elif args.servers:
        servers = [s.strip() for s in args.servers.split(",") if s.strip()]
    else:
        ap.error("give --servers or --permitd-bin")
    try:
        run(servers, args)
    finally:
        if procs is not None:
            procs.close()


def run(servers: List[str], args: argparse.Namespace) -> None:
    target = find_leader(servers)
    client = permitd.Client(servers=[target])
    client.put_limit(args.limit, "bursty", 1_000_000, "1s")
    host, port = target.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    path = "/v1/limits/%s/reserve" % args.limit
    headers = {"Content-Type": "application/json", "Accept": "application/json"}

    def bare() -> None:
        body = b'{"permits":1,"max_wait":"0ns","request_id":"%s"}' % secrets.token_hex(16).encode()
        conn.request("POST", path, body=body, headers=headers)
        r = conn.getresponse()
        r.read()
        if r.status != 200:
            raise SystemExit("bare reserve answered %d" % r.status)

    def reserve() -> None:
        if not client.reserve(args.limit).granted:
            raise SystemExit("reserve refused: the limit is not generous enough")

    @permitd.throttle(args.limit, client=client)
    def noop() -> None:
        pass

    methods: Dict[str, Callable[[], None]] = {
        "bare http.client": bare,
        "Client.reserve": reserve,
        "@throttle call": noop,
    }
    for fn in methods.values():
        for _ in range(args.warmup):
            fn()
    times: Dict[str, List[float]] = {k: [] for k in methods}
    cpu: Dict[str, float] = {k: 0.0 for k in methods}
    block = 50
    done = 0
    while done < args.n:
        k = min(block, args.n - done)
        for name, fn in methods.items():
            ts = times[name]
            c0 = time.thread_time()
            for _ in range(k):
                t0 = time.perf_counter()
                fn()
                ts.append(time.perf_counter() - t0)
            cpu[name] += time.thread_time() - c0
        done += k
    conn.close()
    client.close()

    print("permitd Python client overhead: %d calls per method against %s (the leader), Python %s" % (args.n, target, sys.version.split()[0]))
    print()
    print("| method | median µs | p90 µs | p99 µs | mean µs | caller's CPU µs/call |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, ts in times.items():
        print(
            "| %s | %.0f | %.0f | %.0f | %.0f | %.0f |"
            % (
                name,
                statistics.median(ts) * 1e6,
                pct(ts, 0.90) * 1e6,
                pct(ts, 0.99) * 1e6,
                statistics.fmean(ts) * 1e6,
                cpu[name] / len(ts) * 1e6,
            )
        )
    b = times["bare http.client"]
    print()
    for name in ("Client.reserve", "@throttle call"):
        ts = times[name]
        print(
            "%s over the bare round trip: median %+.0f µs (%+.1f %%), p99 %+.0f µs"
            % (
                name,
                (statistics.median(ts) - statistics.median(b)) * 1e6,
                (statistics.median(ts) / statistics.median(b) - 1) * 100,
                (pct(ts, 0.99) - pct(b, 0.99)) * 1e6,
            )
            + "; caller's CPU %+.0f µs per call" % ((cpu[name] - cpu["bare http.client"]) / len(ts) * 1e6)
        )

    offline(args.limit)


def offline(limit: str) -> None:
    """The client's own work per call, without the network: its transport
    answers a canned grant (the transport's HTTP exchange is http.client's,
    the same as the bare round trip's)."""
    from permitd._http import Response

    c = permitd.Client(servers=["127.0.0.1:1"])
    canned = Response("http://127.0.0.1:1", 200, {}, b'{"granted":true,"wait_ns":0,"expires_in_ns":0,"spacing_ns":0,"duplicate":false}\n', 0.0, 0.0)

    def send(*args: object, **kwargs: object) -> Response:
        canned._json = None
        canned.sent_at = canned.received_at = time.monotonic()
        return canned

    c._t.send = send  # type: ignore[method-assign]

    @permitd.throttle(limit, client=c)
    def noop() -> None:
        pass

    print()
    print("The client's own work per call, the HTTP exchange left out (a canned answer; 200 000 calls):")
    for name, fn in (("Client.reserve", lambda: c.reserve(limit)), ("@throttle call", noop)):
        n = 200_000
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        print("  %s: %.1f µs" % (name, (time.perf_counter() - t0) / n * 1e6))


if __name__ == "__main__":
    main()
