#!/usr/bin/env python3
"""Checks that a throttled function spaces its calls as a strict limit says,
called from threads, processes and asyncio tasks together.

Every caller runs a function decorated as in the README's example
(``@permitd.throttle(limit)``, block mode, the default client from
``PERMITD_SERVERS``) ``--calls`` times and records when its body ran on
:func:`time.monotonic` (CLOCK_MONOTONIC on Linux: one clock for every
process). It then prints the uses in order with their gaps, and compares
the smallest gap with the limit's interval ``I`` and expiry ``E`` (read from
the register): a use is never before its slot and never more than ``E``
after it, so gaps of at least ``I - E`` are guaranteed and gaps near ``I``
are what a healthy cluster gives. Exit status 1 when a gap is below
``I - E``.

    python3 examples/spacing_check.py --servers 127.0.0.1:8001,127.0.0.1:8002,127.0.0.1:8003 \\
        --limit api --threads 2 --processes 2 --tasks 2 --calls 1
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import sys
import threading
import time
from typing import List, Tuple

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))

import permitd  # noqa: E402


def threads(limit: str, tag: str, n: int, calls: int) -> List[Tuple[str, float]]:
    uses: List[Tuple[str, float]] = []
    lock = threading.Lock()

    @permitd.throttle(limit)
    def call_api(who: str) -> Tuple[str, float]:
        return who, time.monotonic()

    def caller(i: int) -> None:
        for _ in range(calls):
            u = call_api("%s-thread%d" % (tag, i))
            with lock:
                uses.append(u)

    ts = [threading.Thread(target=caller, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return uses


def process_main(limit: str, i: int, calls: int, out: "multiprocessing.Queue") -> None:
    out.put(threads(limit, "process%d" % i, 1, calls))


async def tasks(limit: str, n: int, calls: int) -> List[Tuple[str, float]]:
    @permitd.throttle(limit)
    async def acall_api(who: str) -> Tuple[str, float]:
        return who, time.monotonic()

    async def caller(i: int) -> List[Tuple[str, float]]:
        return [await acall_api("task%d" % i) for _ in range(calls)]

    return [u for r in await asyncio.gather(*(caller(i) for i in range(n))) for u in r]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--servers", required=True)
    ap.add_argument("--limit", default="api")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--tasks", type=int, default=2)
    ap.add_argument("--calls", type=int, default=1, help="calls per caller")
    args = ap.parse_args()
    os.environ["PERMITD_SERVERS"] = args.servers  # the default client's, in this process and the children
    view = permitd.default_client().get_limit(args.limit)
    interval = view["interval_ns"] / 1e9
    expiry = interval / 2
    if view.get("expiry"):
        e = view["expiry"]
        expiry = _go_seconds(e)
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=process_main, args=(args.limit, i, args.calls, out)) for i in range(args.processes)]
    t0 = time.monotonic()
    for p in procs:
        p.start()
    res: List[List[Tuple[str, float]]] = []
    th = threading.Thread(target=lambda: res.append(threads(args.limit, "main", args.threads, args.calls)))
    th.start()
    uses = asyncio.run(tasks(args.limit, args.tasks, args.calls))
    th.join()
    for _ in procs:
        uses += out.get()
    for p in procs:
        p.join()
    uses += res[0]
    uses.sort(key=lambda u: u[1])
    print("limit %r: interval %.3fs, expiry %.3fs; %d uses from %d threads, %d processes, %d tasks" % (
        args.limit, interval, expiry, len(uses), args.threads, args.processes, args.tasks))
    prev = None
    gaps = []
    for who, t in uses:
        gap = "" if prev is None else "  gap %.3fs" % (t - prev)
        if prev is not None:
            gaps.append(t - prev)
        print("  %8.3fs  %-16s%s" % (t - t0, who, gap))
        prev = t
    if not gaps:
        return 0
    worst = min(gaps)
    ok = worst >= interval - expiry
    print("smallest gap %.4fs = %.1f%% of the interval (guaranteed: >= I - E = %.3fs): %s" % (
        worst, 100 * worst / interval, interval - expiry, "OK" if ok else "VIOLATED"))
    return 0 if ok else 1


def _go_seconds(s: str) -> float:
    """Parses the Go durations the register prints ("3s", "25ms", "1m30s")."""
    units = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    total, num = 0.0, ""
    i = 0
    while i < len(s):
        ch = s[i]
        if ch.isdigit() or ch == ".":
            num += ch
            i += 1
            continue
        for u in ("ns", "us", "µs", "ms", "s", "m", "h"):
            if s.startswith(u, i):
                total += float(num) * units[u]
                num = ""
                i += len(u)
                break
        else:
            raise ValueError("duration %r" % s)
    return total


if __name__ == "__main__":
    sys.exit(main())
