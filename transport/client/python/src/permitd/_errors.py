"""Exceptions raised by the permitd client.

Every exception derives from :class:`PermitdError`. An exception built from
a server's answer carries that answer's HTTP status (``status``), the base
URL of the server that gave it (``server``) and the server's own
explanation (``error``: the ``"error"`` field of its JSON body), which
permitd writes for the API's users ("limit \\"apx\\" not found; did you mean
\\"api\\"?"). ``str(exc)`` includes all three.
"""

from __future__ import annotations

from typing import Optional

__all__ = [
    "PermitdError",
    "Throttled",
    "NotFound",
    "InvalidRequest",
    "Unavailable",
    "Unauthorized",
    "Forbidden",
    "Conflict",
    "Expired",
    "SpacedGrant",
]

_REASONS = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    410: "Gone",
    413: "Request Entity Too Large",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


class PermitdError(Exception):
    """The base class of every error of the permitd client.

    Attributes:
        message: what went wrong, in the client's words.
        error: the server's explanation (the ``"error"`` text of its
            answer), or ``None`` when no server answered.
        status: the HTTP status of the server's answer, or ``None``.
        server: the base URL of the server that answered, or ``None``.
    """

    def __init__(
        self,
        message: str,
        *,
        error: Optional[str] = None,
        status: Optional[int] = None,
        server: Optional[str] = None,
    ) -> None:
        self.message = message
        self.error = error
        self.status = status
        self.server = server
        super().__init__(self._render())

    def _render(self) -> str:
        text = "permitd: " + self.message
        if self.status is not None:
            reason = _REASONS.get(self.status, "")
            where = " from " + self.server if self.server else ""
            text += " (%d %s%s)" % (self.status, reason, where) if reason else " (%d%s)" % (self.status, where)
        if self.error:
            text += ": " + self.error
        return text


class Throttled(PermitdError):
    """No permit was available within the allowed wait (HTTP 429, or an
    acquire whose timeout ran out).

    Attributes:
        limit: the limit's name.
        retry_after: seconds after which, as known by the server, the same
            request could be granted (``None`` when unknown).
        keys_full: the limit is a key a template would create, and the
            template's ``max_keys`` or the register's cap on templated keys
            is reached (the error names it).
    """

    def __init__(
        self,
        message: str,
        *,
        limit: Optional[str] = None,
        retry_after: Optional[float] = None,
        error: Optional[str] = None,
        status: Optional[int] = None,
        server: Optional[str] = None,
        keys_full: bool = False,
    ) -> None:
        self.limit = limit
        self.retry_after = retry_after
        self.keys_full = keys_full
        super().__init__(message, error=error, status=status, server=server)


class NotFound(PermitdError):
    """The limit (or path) does not exist (HTTP 404). A sidecar answers it
    for every limit but the one it serves."""


class InvalidRequest(PermitdError):
    """The request was invalid: the server rejected it (HTTP 400, 405, 413;
    ``error`` says what is allowed), or the client refused to send it
    (``status`` is ``None``)."""


class Unavailable(PermitdError):
    """No server gave a usable answer within the bounded attempts: connection
    errors, timeouts and HTTP 503 (no leader reachable, overloaded, or the
    request-ID table full). ``error`` is the last 503's text, if any.

    Attributes:
        not_delivered: ``True`` when no attempt got as far as an open
            connection, so the request certainly reached no server; any other
            failure is ambiguous (the server may have applied it).
        last_failure: the last attempt's failure, as text.
    """

    def __init__(
        self,
        message: str,
        *,
        not_delivered: bool = False,
        last_failure: Optional[str] = None,
        error: Optional[str] = None,
        status: Optional[int] = None,
        server: Optional[str] = None,
    ) -> None:
        self.not_delivered = not_delivered
        self.last_failure = last_failure
        super().__init__(message, error=error, status=status, server=server)


class Unauthorized(PermitdError):
    """The server requires an API token and got none, or one it does not
    know (HTTP 401). Give ``token=`` or set ``PERMITD_TOKEN``."""


class Forbidden(PermitdError):
    """The token does not allow the request: its role, or a limit outside
    its patterns (HTTP 403)."""


class Conflict(PermitdError):
    """The request conflicts with the register's state (HTTP 409), such as
    deleting a leased limit whose leases still hold permits."""


class Expired(PermitdError):
    """A granted permit expired before it could be used (the caller slept
    past its expiry). It must not be used; reserve again."""


class SpacedGrant(PermitdError):
    """The permits of a grant must be used one by one, each at its own slot
    (a strict limit's grant of several permits), and were asked to be used
    together. Use :meth:`Grant.sleep` with a permit index, or
    :meth:`Client.acquire_each`. The permits of that grant are forfeited."""


def error_for(status: int, error: str, server: str, what: str) -> PermitdError:
    """Returns the exception for a non-2xx answer of a server."""
    kw = {"error": error, "status": status, "server": server}
    if status == 404:
        return NotFound(what + ": not found", **kw)
    if status in (400, 405, 413):
        return InvalidRequest(what + ": invalid request", **kw)
    if status == 401:
        return Unauthorized(what + ": unauthorized", **kw)
    if status == 403:
        return Forbidden(what + ": forbidden", **kw)
    if status == 409:
        return Conflict(what + ": conflict", **kw)
    if status == 429:
        return Throttled(what + ": throttled", **kw)
    if status == 503:
        return Unavailable(what + ": unavailable", **kw)
    return PermitdError(what + ": unexpected answer", **kw)
