"""Plain HTTP to a port that does not serve permitd's API over plain HTTP:
the final error names what the port is and the fix, as the Go client's
(transport/client/wrongport.go) does. The servers here are sockets on
loopback: one that speaks TLS and closes a plain connection without an
answer (as an agent run with --tls-cert does), one that resets it (as a
node's raft port does)."""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import tempfile
import threading
import unittest

import harness
import permitd
from permitd import _http


def make_certs(test: unittest.TestCase) -> str:
    """A CA and a node certificate for 127.0.0.1 made by `permitd certs
    create`, in a directory removed after the test. Returns the directory."""
    d = tempfile.mkdtemp(prefix="permitd-wrongport-")
    test.addCleanup(shutil.rmtree, d, True)
    out = os.path.join(d, "certs")
    harness.certs_create(out, "n1", "127.0.0.1", "app")
    return out


def serve(test: unittest.TestCase, handle) -> str:  # type: ignore[no-untyped-def]
    """Accepts connections on loopback in a thread and hands each to
    handle(conn) (which closes it). Returns "host:port"; the listener
    closes after the test."""
    ln = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ln.bind(("127.0.0.1", 0))
    ln.listen(16)
    stopped = threading.Event()

    def loop() -> None:
        while not stopped.is_set():
            try:
                conn, _ = ln.accept()
            except OSError:
                return
            try:
                handle(conn)
            except (OSError, ssl.SSLError):
                pass
            finally:
                conn.close()

    t = threading.Thread(target=loop, daemon=True)
    t.start()

    def stop() -> None:
        stopped.set()
        try:
            ln.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        ln.close()
        t.join(5)

    test.addCleanup(stop)
    return "127.0.0.1:%d" % ln.getsockname()[1]


def read_head(conn: socket.socket) -> None:
    """Reads a request's head (a GET has no body), so that closing the
    connection sends a FIN, not a reset for unread bytes."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        b = conn.recv(4096)
        if not b:
            return
        buf += b


def tls_server(test: unittest.TestCase, certs: str, client_cert: bool = False) -> "tuple[str, threading.Event, threading.Event]":
    """A port that speaks TLS 1.3 (asking for a client certificate when
    client_cert) and closes a plain connection without an answer. Returns
    its "host:port" and events set when a plain request was closed and
    when a TLS handshake was seen."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_cert_chain(os.path.join(certs, "node-n1.crt"), os.path.join(certs, "node-n1.key"))
    if client_cert:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(os.path.join(certs, "ca.crt"))
    plain, handshake = threading.Event(), threading.Event()

    def handle(conn: socket.socket) -> None:
        first = conn.recv(1, socket.MSG_PEEK)
        if first != b"\x16":  # not a TLS handshake record: close, no answer
            read_head(conn)
            plain.set()
            return
        handshake.set()
        with ctx.wrap_socket(conn, server_side=True) as t:
            t.recv(1)

    return serve(test, handle), plain, handshake


def resetting_server(test: unittest.TestCase) -> "tuple[str, threading.Event]":
    """A port that reads a request's first byte and resets the connection
    with the rest unread, as a node's raft port does. Returns its
    "host:port" and an event set when it has reset one."""
    reset = threading.Event()

    def handle(conn: socket.socket) -> None:
        conn.recv(1)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        conn.close()
        reset.set()

    return serve(test, handle), reset


class WrongPortTest(unittest.TestCase):
    def client(self, addr: str, rounds: int = 1) -> permitd.Client:
        c = permitd.Client([addr], timeout=5, rounds=rounds)
        self.addCleanup(c.close)
        return c

    def unavailable(self, c: permitd.Client) -> str:
        with self.assertRaises(permitd.Unavailable) as cm:
            c.list_limits()
        return str(cm.exception)

    def test_plain_http_to_a_tls_port_says_it_speaks_tls(self) -> None:
        addr, plain, handshake = tls_server(self, make_certs(self))
        msg = self.unavailable(self.client(addr))
        self.assertTrue(plain.is_set(), "the request never reached the TLS port")
        self.assertTrue(handshake.is_set(), "no TLS probe reached the port")
        self.assertIn("%s speaks TLS, not plain HTTP" % addr, msg)
        self.assertIn("--tls-ca", msg)
        self.assertIn("https://", msg)
        self.assertNotIn("client certificate", msg)
        self.assertIn("1 attempt over 1 server;", msg)

    def test_plain_http_to_a_tls_port_that_wants_a_client_certificate(self) -> None:
        addr, _, handshake = tls_server(self, make_certs(self), client_cert=True)
        msg = self.unavailable(self.client(addr))
        self.assertTrue(handshake.is_set(), "no TLS probe reached the port")
        self.assertIn("%s speaks TLS, not plain HTTP, and asks for a client certificate" % addr, msg)
        self.assertIn("--tls-ca", msg)
        self.assertIn("--tls-cert", msg)

    def test_a_reset_without_answer_says_raft_port(self) -> None:
        addr, reset = resetting_server(self)
        msg = self.unavailable(self.client(addr, rounds=2))
        self.assertTrue(reset.is_set(), "the server never reset a connection")
        self.assertIn("%s reset the connection without an HTTP answer, as a node's raft port does" % addr, msg)
        self.assertIn("--http-addr", msg)
        self.assertIn("not their --raft-addr", msg)
        self.assertIn("2 attempts over 1 server;", msg)

    def test_a_400_from_go_on_a_tls_port_says_it_speaks_tls(self) -> None:
        # Go's net/http on a TLS port answers a plain request with 400.
        def handle(conn: socket.socket) -> None:
            read_head(conn)
            conn.sendall(b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")

        c = self.client(serve(self, handle))
        with self.assertRaises(permitd.InvalidRequest) as cm:
            c.list_limits()
        self.assertIn("Client sent an HTTP request to an HTTPS server: the server speaks TLS: give the cluster's CA", str(cm.exception))
        self.assertIn("https://", str(cm.exception))

    def test_a_400_from_permitd_on_a_tls_port_says_it_speaks_tls(self) -> None:
        # A permitd agent's TLS port answers a plain request with 400.
        def handle(conn: socket.socket) -> None:
            read_head(conn)
            body = b"this port speaks TLS: use https:// (curl --cacert CA)\n"
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))

        c = self.client(serve(self, handle))
        with self.assertRaises(permitd.InvalidRequest) as cm:
            c.list_limits()
        self.assertIn("this port speaks TLS, not plain HTTP: give the cluster's CA", str(cm.exception))
        self.assertIn("$PERMITD_TLS_CA", str(cm.exception))

    def test_tls_to_a_plain_port_says_it_speaks_plain_http(self) -> None:
        def handle(conn: socket.socket) -> None:
            conn.recv(4096)
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

        addr = serve(self, handle)
        c = permitd.Client([addr], timeout=5, rounds=1, ca_file=os.path.join(make_certs(self), "ca.crt"))
        self.addCleanup(c.close)
        msg = self.unavailable(c)
        self.assertIn("%s speaks plain HTTP, not TLS: drop the CA" % addr, msg)
        self.assertIn("PERMITD_TLS_CA", msg)

    def test_tls_without_a_certificate_to_a_mutual_tls_port_says_raft_port(self) -> None:
        # As a node's raft port: the handshake fails on the missing
        # certificate with an alert; the port then reads what the client
        # sent until it closes (a close with bytes unread would reset the
        # connection, and the reset could overtake the alert).
        certs = make_certs(self)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        ctx.load_cert_chain(os.path.join(certs, "node-n1.crt"), os.path.join(certs, "node-n1.key"))
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(os.path.join(certs, "ca.crt"))

        def handle(conn: socket.socket) -> None:
            with conn.dup() as raw:  # open after a failed wrap_socket closes conn
                try:
                    with ctx.wrap_socket(conn, server_side=True) as t:
                        t.recv(1)
                except (OSError, ssl.SSLError):
                    raw.settimeout(2)
                    while raw.recv(4096):
                        pass

        addr = serve(self, handle)
        c = permitd.Client([addr], timeout=5, rounds=1, ca_file=os.path.join(certs, "ca.crt"))
        self.addCleanup(c.close)
        msg = self.unavailable(c)
        self.assertIn("%s asks for a client certificate, as a node's raft port (mutual TLS) does" % addr, msg)
        self.assertIn("--http-addr", msg)

    def test_a_plain_close_is_not_called_tls(self) -> None:
        # A server that closes without an answer but does not speak TLS
        # either: no hint (the probe's handshake fails), and the probe
        # does not wait for it longer than the probe's bound.
        closed = threading.Event()

        def handle(conn: socket.socket) -> None:
            read_head(conn)
            closed.set()

        addr = serve(self, handle)
        msg = self.unavailable(self.client(addr))
        self.assertTrue(closed.is_set())
        self.assertIn("RemoteDisconnected", msg)
        self.assertNotIn("TLS", msg)
        self.assertNotIn("raft", msg)

    def test_speaks_tls_only_detects(self) -> None:
        addr, _, _ = tls_server(self, make_certs(self))
        host, port = _http.split_hostport(addr)
        self.assertEqual(_http.speaks_tls(host, port, 1.0), (True, False))
        closing = serve(self, lambda conn: None)
        host, port = _http.split_hostport(closing)
        self.assertEqual(_http.speaks_tls(host, port, 1.0), (False, False))
        self.assertEqual(_http.speaks_tls(host, port, 0.0), (False, False), "no time left: no probe")

    def test_plurals(self) -> None:
        for n, noun, want in ((0, "server", "0 servers"), (1, "server", "1 server"), (3, "attempt", "3 attempts")):
            self.assertEqual(_http.plural(n, noun), want)


if __name__ == "__main__":
    unittest.main()
