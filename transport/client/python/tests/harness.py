"""Test harness: real permitd agents and worker sidecars on free loopback
ports, started from the binary named by ``PERMITD_BIN``.

Every wait is on a condition with a deadline (:func:`wait_until`); every
process started is killed by :meth:`Procs.close`, which the tests register
as a cleanup, and at interpreter exit as a last resort.
"""

from __future__ import annotations

import atexit
import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from typing import Callable, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(os.path.dirname(HERE), "src")
if SRC not in sys.path:
    sys.path.insert(0, SRC)

PERMITD_BIN = os.environ.get("PERMITD_BIN", "")

# The tests give every client its servers, token and certificates; a
# developer's own settings must not leak into them.
for _var in ("PERMITD_TOKEN", "PERMITD_SERVERS", "PERMITD_TLS_CA", "PERMITD_TLS_CERT", "PERMITD_TLS_KEY"):
    os.environ.pop(_var, None)


def require_binary() -> str:
    """The permitd binary, or skips the test with the reason."""
    if not PERMITD_BIN:
        raise unittest.SkipTest("PERMITD_BIN is not set: build one with `go build -o /tmp/permitd ./cmd/permitd`")
    if not os.access(PERMITD_BIN, os.X_OK):
        raise unittest.SkipTest("PERMITD_BIN=%s is not an executable file" % PERMITD_BIN)
    return PERMITD_BIN


def certs_create(out: str, nodes: str, hosts: str, clients: str = "") -> None:
    """Makes a CA, node and (with clients) client certificates in out with
    `permitd certs create` (README's Security section)."""
    args = [require_binary(), "certs", "create", "--out", out, "--nodes", nodes, "--hosts", hosts]
    if clients:
        args += ["--clients", clients]
    subprocess.run(
        args,
        check=True,
        capture_output=True,
        timeout=30,
    )


def free_ports(n: int) -> List[int]:
    """n distinct free TCP ports on 127.0.0.1 (held open together while
    chosen, so that they differ)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def wait_until(cond: Callable[[], bool], timeout: float, what: str, interval: float = 0.02) -> None:
    """Polls cond until it is true; fails after timeout seconds. A cond that
    raises AssertionError (a process it watches exited) fails at once with
    that error; any other exception counts as false (not checkable yet)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if cond():
                return
        except AssertionError:
            raise
        except Exception:  # noqa: BLE001 - a condition that cannot be checked yet is false
            pass
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.1fs waiting for %s" % (timeout, what))
        time.sleep(interval)


def http_json(
    addr: str,
    method: str,
    path: str,
    body: Optional[dict] = None,
    *,
    ssl_context: Optional[ssl.SSLContext] = None,
    token: Optional[str] = None,
    timeout: float = 2.0,
) -> Tuple[int, dict]:
    """One raw HTTP request (no client library): (status, JSON body)."""
    host, port = addr.rsplit(":", 1)
    if ssl_context is not None:
        c = http.client.HTTPSConnection(host, int(port), timeout=timeout, context=ssl_context)
    else:
        c = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = "Bearer " + token
        c.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
        r = c.getresponse()
        data = r.read()
        try:
            return r.status, json.loads(data or b"{}")
        except ValueError:
            return r.status, {"raw": data.decode("utf-8", "replace")}
    finally:
        c.close()


class Proc:
    """One process of the binary, its log in a file."""

    def __init__(self, name: str, args: List[str], log_path: str, env: Optional[Dict[str, str]] = None) -> None:
        self.name = name
        self.args = args
        self.log_path = log_path
        self._log = open(log_path, "ab")
        self.popen = subprocess.Popen(
            args,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
        )

    def alive(self) -> bool:
        return self.popen.poll() is None

    def kill(self) -> None:
        """SIGKILL and reap."""
        if self.popen.poll() is None:
            try:
                self.popen.send_signal(signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self._log.close()

    def log_tail(self, n: int = 30) -> str:
        try:
            with open(self.log_path, "rb") as f:
                lines = f.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])


class Procs:
    """The processes a test (or a module) started; close() kills them all."""

    _all: List["Procs"] = []

    def __init__(self, prefix: str) -> None:
        self.dir = tempfile.mkdtemp(prefix="permitd-py-" + prefix + "-")
        self.procs: List[Proc] = []
        self._lock = threading.Lock()
        Procs._all.append(self)

    def start(self, name: str, args: List[str], env: Optional[Dict[str, str]] = None) -> Proc:
        p = Proc(name, [require_binary()] + args, os.path.join(self.dir, name + ".log"), env)
        with self._lock:
            self.procs.append(p)
        return p

    def logs(self) -> str:
        return "\n".join("--- %s:\n%s" % (p.name, p.log_tail()) for p in self.procs)

    def close(self) -> None:
        with self._lock:
            procs, self.procs = self.procs, []
        for p in procs:
            p.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


@atexit.register
def _kill_leftovers() -> None:
    for ps in list(Procs._all):
        ps.close()


class Agent:
    """One register node."""

    def __init__(self, node_id: str, raft_addr: str, http_addr: str, data_dir: str) -> None:
        self.id = node_id
        self.raft_addr = raft_addr
        self.http_addr = http_addr
        self.data_dir = data_dir
        self.proc: Optional[Proc] = None


class Cluster:
    """A 3-node (by default) register on loopback.

    Args:
        tls: paths {"cert": {id: path}, "key": {id: path}, "ca": path} to run
            the agents with TLS; token_file: the agents' --token-file;
            admin_token: the token the harness's own requests carry.
    """

    def __init__(
        self,
        procs: Procs,
        n: int = 3,
        *,
        tls: Optional[dict] = None,
        token_file: Optional[str] = None,
        admin_token: Optional[str] = None,
        client_cert_auth: bool = False,
        admin_cert: Optional[Tuple[str, str]] = None,
        extra: Optional[List[str]] = None,
    ) -> None:
        self.procs = procs
        ports = free_ports(2 * n)
        self.agents = [
            Agent(
                "n%d" % (i + 1),
                "127.0.0.1:%d" % ports[2 * i],
                "127.0.0.1:%d" % ports[2 * i + 1],
                os.path.join(procs.dir, "n%d" % (i + 1)),
            )
            for i in range(n)
        ]
        self.tls = tls
        self.token_file = token_file
        self.admin_token = admin_token
        self.client_cert_auth = client_cert_auth
        self.extra = extra or []
        self.ssl_context: Optional[ssl.SSLContext] = None
        if tls:
            self.ssl_context = ssl.create_default_context(cafile=tls["ca"])
            if admin_cert:
                self.ssl_context.load_cert_chain(*admin_cert)

    @property
    def servers(self) -> List[str]:
        return [a.http_addr for a in self.agents]

    def start(self) -> "Cluster":
        initial = ",".join("%s=%s" % (a.id, a.raft_addr) for a in self.agents)
        for a in self.agents:
            self.start_agent(a, initial)
        self.wait_ready()
        return self

    def start_agent(self, a: Agent, initial: Optional[str] = None) -> None:
        args = ["agent", "--id", a.id, "--data-dir", a.data_dir, "--raft-addr", a.raft_addr, "--http-addr", a.http_addr]
        if initial:
            args += ["--initial-cluster", initial]
        if self.tls:
            args += ["--tls-cert", self.tls["cert"][a.id], "--tls-key", self.tls["key"][a.id], "--tls-ca", self.tls["ca"]]
        if self.client_cert_auth:
            args += ["--client-cert-auth"]
        if self.token_file:
            args += ["--token-file", self.token_file]
        a.proc = self.procs.start(a.id, args + self.extra)

    def status(self, a: Agent, timeout: float = 1.0) -> dict:
        code, st = http_json(a.http_addr, "GET", "/v1/status", ssl_context=self.ssl_context, token=self.admin_token, timeout=timeout)
        if code != 200:
            raise AssertionError("status of %s: %d %s" % (a.id, code, st))
        return st

    def live(self) -> List[Agent]:
        return [a for a in self.agents if a.proc is not None and a.proc.alive()]

    def leader(self) -> Optional[str]:
        """The leader every live node agrees on and is ready with, or None."""
        ids = set()
        for a in self.live():
            try:
                st = self.status(a)
            except Exception:  # noqa: BLE001
                return None
            if not st.get("ready") or not st.get("leader_id"):
                return None
            ids.add(st["leader_id"])
        return ids.pop() if len(ids) == 1 else None

    def wait_ready(self, timeout: float = 20.0) -> str:
        """Waits until every live node is ready and they agree on a live
        leader; returns its ID."""
        found: List[str] = []

        def ok() -> bool:
            for a in self.agents:
                if a.proc is not None and not a.proc.alive() and a.proc.popen.returncode not in (-9, None):
                    raise AssertionError("agent %s exited with %s:\n%s" % (a.id, a.proc.popen.returncode, a.proc.log_tail()))
            lid = self.leader()
            if lid is None or lid not in {a.id for a in self.live()}:
                return False
            found.append(lid)
            return True

        try:
            wait_until(ok, timeout, "a ready cluster with one leader")
        except AssertionError as e:
            raise AssertionError("%s\n%s" % (e, self.procs.logs())) from None
        return found[-1]

    def agent(self, node_id: str) -> Agent:
        return next(a for a in self.agents if a.id == node_id)

    def kill(self, node_id: str) -> None:
        a = self.agent(node_id)
        assert a.proc is not None
        a.proc.kill()


class Sidecar:
    """A `permitd worker` sidecar of one leased limit."""

    def __init__(
        self,
        procs: Procs,
        cluster: Cluster,
        limit: str,
        group: str = "g1",
        name: str = "w1",
        ttl: str = "1s",
        extra: Optional[List[str]] = None,
    ) -> None:
        gossip, http_port = free_ports(2)
        self.http_addr = "127.0.0.1:%d" % http_port
        self.gossip_addr = "127.0.0.1:%d" % gossip
        args = [
            "worker",
            "--group",
            group,
            "--name",
            name,
            "--limit",
            limit,
            "--servers",
            ",".join(cluster.servers),
            "--gossip-addr",
            self.gossip_addr,
            "--http-addr",
            self.http_addr,
            "--ttl",
            ttl,
        ] + (extra or [])
        self.proc = procs.start("sidecar-" + name, args)

    def wait_ready(self, timeout: float = 20.0) -> None:
        def ready() -> bool:
            if not self.proc.alive():
                raise AssertionError("sidecar exited:\n" + self.proc.log_tail())
            return http_json(self.http_addr, "GET", "/readyz")[0] == 200

        wait_until(ready, timeout, "sidecar %s ready" % self.http_addr)


def gaps(ts: List[float]) -> List[float]:
    """Consecutive differences of the sorted instants."""
    s = sorted(ts)
    return [b - a for a, b in zip(s, s[1:])]


def metric(addr: str, name: str, label: str = "", timeout: float = 2.0) -> float:
    """The sum of a Prometheus metric's samples on addr's GET /metrics whose
    labels contain ``label`` (such as 'outcome="invalid"'; "" for all)."""
    host, port = addr.rsplit(":", 1)
    c = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode("utf-8", "replace")
    finally:
        c.close()
    total = 0.0
    for line in text.splitlines():
        if (line.startswith(name + "{") or line.startswith(name + " ")) and label in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def max_in_window(ts: List[float], w: float) -> int:
    """The most instants in any half-open window of length w."""
    s = sorted(ts)
    best = 0
    j = 0
    for i in range(len(s)):
        while s[i] - s[j] >= w:
            j += 1
        best = max(best, i - j + 1)
    return best
