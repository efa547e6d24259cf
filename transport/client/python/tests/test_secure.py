"""TLS, client certificates and API tokens against a secured 3-node register
made as README's Security section does (`permitd certs create`, `permitd
tokens create`, agents with --tls-* --client-cert-auth --token-file)."""

from __future__ import annotations

import os
import subprocess
import time
import unittest
from typing import Dict

import harness
import permitd


def make_token(role: str, name: str, limits: str = "") -> Dict[str, str]:
    args = [harness.require_binary(), "tokens", "create", "--role", role, "--name", name]
    if limits:
        args += ["--limits", limits]
    out = subprocess.run(args, check=True, capture_output=True, text=True, timeout=30).stdout
    tok: Dict[str, str] = {}
    for line in out.splitlines():
        if line.startswith("secret: "):
            tok["secret"] = line[len("secret: ") :].strip()
        elif line.startswith("token file line: "):
            tok["line"] = line[len("token file line: ") :].strip()
    assert "secret" in tok and "line" in tok, out
    return tok


class SecureClusterTest(unittest.TestCase):
    procs: harness.Procs
    cluster: harness.Cluster

    @classmethod
    def setUpClass(cls) -> None:
        harness.require_binary()
        cls.procs = harness.Procs("secure")
        cls.addClassCleanup(cls.procs.close)
        d = cls.procs.dir
        certs = os.path.join(d, "certs")
        harness.certs_create(certs, "n1,n2,n3", "127.0.0.1,localhost", "app")
        cls.ca = os.path.join(certs, "ca.crt")
        cls.cert = os.path.join(certs, "client-app.crt")
        cls.key = os.path.join(certs, "client-app.key")
        cls.ops = make_token("admin", "ops")
        cls.app = make_token("client", "app", "api*")
        cls.other = make_token("client", "other", "other*")
        tokens = os.path.join(d, "tokens")
        with open(tokens, "w") as f:
            f.write("\n".join(t["line"] for t in (cls.ops, cls.app, cls.other)) + "\n")
        tls = {
            "ca": cls.ca,
            "cert": {"n%d" % i: os.path.join(certs, "node-n%d.crt" % i) for i in (1, 2, 3)},
            "key": {"n%d" % i: os.path.join(certs, "node-n%d.key" % i) for i in (1, 2, 3)},
        }
        cls.cluster = harness.Cluster(
            cls.procs,
            tls=tls,
            token_file=tokens,
            admin_token=cls.ops["secret"],
            client_cert_auth=True,
            admin_cert=(cls.cert, cls.key),
        ).start()
        admin = permitd.Client(cls.cluster.servers, token=cls.ops["secret"], ca_file=cls.ca, cert_file=cls.cert, key_file=cls.key)
        admin.put_limit("api-secure", "strict", 5, "1s", max_reserved=4, expiry=0.05)
        admin.close()

    def client(self, token: object = None, **kw: object) -> permitd.Client:
        args = dict(ca_file=self.ca, cert_file=self.cert, key_file=self.key)
        args.update(kw)
        c = permitd.Client(self.cluster.servers, token=token, **args)  # type: ignore[arg-type]
        self.addCleanup(c.close)
        return c

    def test_tls_and_token(self) -> None:
        c = self.client(self.app["secret"])
        self.assertTrue(all(s.startswith("https://") for s in c.servers))
        g = c.reserve("api-secure", max_wait=1)
        self.assertTrue(g.granted, g)
        ts = []

        @permitd.throttle("api-secure", client=c)
        def use() -> None:
            ts.append(time.monotonic())

        for _ in range(3):
            use()
        # I - E - EPS, EPS the 30 ms of test_client.ClientTest.
        self.assertGreaterEqual(min(harness.gaps(ts)), 0.2 - 0.05 - 0.03)

    def test_token_from_environment(self) -> None:
        old = os.environ.get("PERMITD_TOKEN")
        os.environ["PERMITD_TOKEN"] = self.app["secret"]
        self.addCleanup(lambda: os.environ.pop("PERMITD_TOKEN") if old is None else os.environ.__setitem__("PERMITD_TOKEN", old))
        c = self.client()
        self.assertTrue(c.reserve("api-secure", max_wait=1).granted)

    def test_missing_unknown_and_restricted_tokens(self) -> None:
        for tok in ("", "pmt_not-a-token"):
            with self.assertRaises(permitd.Unauthorized, msg=tok) as cm:
                self.client(tok).reserve("api-secure")
            self.assertEqual(cm.exception.status, 401)
            self.assertTrue(cm.exception.error)
            if tok:
                self.assertNotIn(tok, str(cm.exception))  # the secret is never repeated
        with self.assertRaises(permitd.Forbidden) as fb:
            self.client(self.other["secret"]).reserve("api-secure")
        self.assertEqual(fb.exception.status, 403)
        self.assertTrue(fb.exception.error)
        # A client token may not administer limits.
        with self.assertRaises(permitd.Forbidden):
            self.client(self.app["secret"]).put_limit("api-mine", "strict", 1, "1s")

    def test_tls_failures_are_unavailable(self) -> None:
        # No client certificate: the agents require one.
        c = self.client(self.app["secret"], cert_file=None, key_file=None, rounds=1)
        with self.assertRaises(permitd.Unavailable):
            c.reserve("api-secure")
        # The system's roots do not know the development CA.
        servers = ["https://" + s for s in self.cluster.servers]
        c2 = permitd.Client(servers, token=self.app["secret"], rounds=1)
        self.addCleanup(c2.close)
        with self.assertRaises(permitd.Unavailable) as cm:
            c2.reserve("api-secure")
        self.assertTrue(cm.exception.not_delivered)
        self.assertIn("CERTIFICATE_VERIFY_FAILED", cm.exception.last_failure)
        # Plain HTTP to a client configured for TLS is refused up front.
        with self.assertRaises(permitd.InvalidRequest):
            permitd.Client(["http://" + self.cluster.servers[0]], ca_file=self.ca)

    def test_plain_http_to_the_tls_cluster_names_the_cause(self) -> None:
        # A client without TLS settings sends plain HTTP: the error says
        # the servers speak TLS and what to give (a client certificate
        # too, with --client-cert-auth), not just RemoteDisconnected.
        # The agent's port answers the plain request 400 (transport/server's
        # sniffer).
        c = permitd.Client(self.cluster.servers, token=self.app["secret"], rounds=1)
        self.addCleanup(c.close)
        with self.assertRaises(permitd.InvalidRequest) as cm:
            c.reserve("api-secure")
        msg = str(cm.exception)
        self.assertIn("this port speaks TLS, not plain HTTP: give the cluster's CA", msg)
        self.assertIn("--tls-cert", msg)


class HostnameTest(unittest.TestCase):
    """A node certificate valid for "localhost" only (`permitd certs create
    --hosts localhost`): the client checks the name it dials against it."""

    procs: harness.Procs
    cluster: harness.Cluster

    @classmethod
    def setUpClass(cls) -> None:
        harness.require_binary()
        cls.procs = harness.Procs("hostname")
        cls.addClassCleanup(cls.procs.close)
        certs = os.path.join(cls.procs.dir, "certs")
        harness.certs_create(certs, "n1", "localhost")
        cls.ca = os.path.join(certs, "ca.crt")
        tls = {"ca": cls.ca, "cert": {"n1": os.path.join(certs, "node-n1.crt")}, "key": {"n1": os.path.join(certs, "node-n1.key")}}
        cls.cluster = harness.Cluster(cls.procs, n=1, tls=tls)
        # The harness's own readiness checks dial 127.0.0.1: they verify
        # the chain but not the name, which is what the test is about.
        assert cls.cluster.ssl_context is not None
        cls.cluster.ssl_context.check_hostname = False
        cls.cluster.start()
        cls.port = int(cls.cluster.servers[0].rsplit(":", 1)[1])

    def test_the_dialled_name_must_match_the_certificate(self) -> None:
        by_ip = permitd.Client(["127.0.0.1:%d" % self.port], ca_file=self.ca, rounds=1)
        self.addCleanup(by_ip.close)
        with self.assertRaises(permitd.Unavailable) as cm:
            by_ip.reserve("h")
        e = cm.exception
        self.assertTrue(e.not_delivered, e)
        self.assertIn("CERTIFICATE_VERIFY_FAILED", e.last_failure)
        self.assertIn("127.0.0.1", e.last_failure)
        self.assertIn("CERTIFICATE_VERIFY_FAILED", str(e))
        by_name = permitd.Client(["localhost:%d" % self.port], ca_file=self.ca)
        self.addCleanup(by_name.close)
        self.assertEqual(by_name.servers, ["https://localhost:%d" % self.port])
        by_name.put_limit("h", "strict", 10, "1s")
        self.assertTrue(by_name.reserve("h", max_wait=1).granted)


if __name__ == "__main__":
    unittest.main()
