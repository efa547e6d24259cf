"""A loopback HTTP proxy in front of one agent that can lose answers.

The agents' fault hooks (``--test-hooks``: partitions, loss and delay on
raft's connections) act on the nodes' own traffic, not on a client's HTTP
answers, so the tests put this proxy between the client and an agent:

* ``drop``: forward the request, read the agent's answer (the decision is
  made and committed), then close the client's connection without a byte
  of it: a reset after sending, the ambiguous failure a retry must survive;
* ``hold``: forward the request and read the answer, then send nothing
  until the client gives up (its timeout), then close;
* ``delay``: forward the request, read the answer, hold it ``delay``
  seconds (set with :meth:`LossyProxy.lose`), then pass it on: a slow
  network, for an answer that arrives after the permit it grants expired;
* ``forward``: pass the answer on.

The proxy records every request it forwarded with the agent's answer.
"""

from __future__ import annotations

import http.client
import http.server
import threading
from typing import List, Tuple


class Exchange:
    """One request the proxy forwarded, and the agent's answer."""

    def __init__(self, method: str, path: str, body: bytes, status: int, answer: bytes, mode: str) -> None:
        self.method = method
        self.path = path
        self.body = body
        self.status = status
        self.answer = answer
        self.mode = mode


class LossyProxy:
    """Serves on a free loopback port; ``lose(n, mode)`` makes the next n
    answers to reserves lost in that mode."""

    def __init__(self, target: str) -> None:
        self.target = target
        self._lock = threading.Lock()
        self._lose: List[str] = []
        self.delay = 0.0
        self.exchanges: List[Exchange] = []
        self._release = threading.Event()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # quiet
                pass

            def _relay(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                host, port = proxy.target.rsplit(":", 1)
                up = http.client.HTTPConnection(host, int(port), timeout=10)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                    up.request(self.command, self.path, body=body or None, headers=headers)
                    r = up.getresponse()
                    answer = r.read()
                    status = r.status
                    resp_headers: List[Tuple[str, str]] = [
                        (k, v) for k, v in r.getheaders() if k.lower() not in ("connection", "transfer-encoding", "content-length")
                    ]
                finally:
                    up.close()
                mode = "forward"
                if self.path.endswith("/reserve"):
                    with proxy._lock:
                        if proxy._lose:
                            mode = proxy._lose.pop(0)
                with proxy._lock:
                    proxy.exchanges.append(Exchange(self.command, self.path, body, status, answer, mode))
                self.close_connection = True
                if mode == "drop":
                    return  # the connection closes with no answer
                if mode == "hold":
                    proxy._release.wait(30)
                    return
                if mode == "delay":
                    proxy._release.wait(proxy.delay)
                self.send_response(status)
                for k, v in resp_headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(answer)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(answer)

            do_GET = do_POST = do_PUT = do_DELETE = _relay

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.addr = "127.0.0.1:%d" % self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    def lose(self, n: int, mode: str = "drop", delay: float = 0.0) -> None:
        """Loses the answers of the next n reserves (mode "drop" or "hold"),
        or delays each by ``delay`` seconds (mode "delay")."""
        if mode not in ("drop", "hold", "delay"):
            raise ValueError("mode %r" % mode)
        with self._lock:
            self._lose.extend([mode] * n)
            if mode == "delay":
                self.delay = delay

    def close(self) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()
