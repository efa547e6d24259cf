"""The answer to a reserve: a :class:`Grant`, and how to wait for it."""

from __future__ import annotations

import time
from typing import Optional

from ._errors import Expired, InvalidRequest, SpacedGrant, Throttled
from ._http import asleep_until, sleep_until

__all__ = ["Grant"]


class Grant:
    """The answer to a reserve: granted permits, or a refusal.

    All durations are in seconds; all instants are :func:`time.monotonic`
    values of the process that made the reserve.

    A grant of ``permits`` permits gives them slots ``spacing`` apart:
    permit ``j`` (0-based) may be used ``wait + j * spacing`` after the
    answer was received (:meth:`ready_at`), and stops being usable
    ``expires_in + j * spacing`` after the request was sent
    (:meth:`expires_at`). The server counts both from the moment its answer
    left it; the client counts the wait from the answer's receipt (never
    earlier than its departure) and the expiry from the request's sending
    (never later), so neither can make a permit early.

    Attributes:
        granted: whether the permits were reserved.
        limit: the limit's name.
        permits: how many permits the reserve asked for.
        wait: (granted) seconds after ``received_at`` until the first
            permit may be used; 0 from a sidecar, which waits before it
            answers.
        spacing: (granted) seconds between the slots of the grant's permits:
            a strict limit's interval, 0 for the algorithms that grant
            permits together.
        expires_in: (granted) seconds after ``sent_at`` at which the first
            permit stops being usable, or ``None`` when the permits do not
            expire. Negative for a replayed grant that had already expired.
        retry_after: (refused) seconds after ``received_at`` at which, as
            known by the server, the same request could be granted.
        duplicate: the server had already decided this request ID (a retry
            after a lost answer) and replayed that decision.
        request_id: the idempotency key the reserve carried.
        sent_at: when the attempt that was answered was sent.
        received_at: when its answer had been received, before parsing.
        server: the base URL of the server that answered.
        error: (refused) the server's explanation.
        keys_full: (refused) the limit is a key a template would create
            (``prefix:key``), and the template's ``max_keys`` or the
            register's cap on templated keys is reached (``error`` names
            it): nothing was created; ``retry_after`` is when a key may go.
        checked_at: when :meth:`sleep` (or :meth:`asleep`) last found the
            permit it waited for unexpired, right before returning; ``None``
            before. The permit was usable then (``checked_at <=
            expires_at(j)``); the caller's use comes a little later.
    """

    __slots__ = (
        "granted",
        "limit",
        "permits",
        "wait",
        "spacing",
        "expires_in",
        "retry_after",
        "duplicate",
        "request_id",
        "sent_at",
        "received_at",
        "server",
        "error",
        "keys_full",
        "checked_at",
    )

    def __init__(
        self,
        *,
        granted: bool,
        limit: str,
        permits: int,
        wait: float = 0.0,
        spacing: float = 0.0,
        expires_in: Optional[float] = None,
        retry_after: float = 0.0,
        duplicate: bool = False,
        request_id: str = "",
        sent_at: float = 0.0,
        received_at: float = 0.0,
        server: str = "",
        error: Optional[str] = None,
        keys_full: bool = False,
    ) -> None:
        self.granted = granted
        self.limit = limit
        self.permits = permits
        self.wait = wait
        self.spacing = spacing
        self.expires_in = expires_in
        self.retry_after = retry_after
        self.duplicate = duplicate
        self.request_id = request_id
        self.sent_at = sent_at
        self.received_at = received_at
        self.server = server
        self.error = error
        self.keys_full = keys_full
        self.checked_at: Optional[float] = None

    def __repr__(self) -> str:
        if self.granted:
            return "Grant(granted=True, limit=%r, permits=%d, wait=%.6f, spacing=%.6f, expires_in=%r, duplicate=%r, request_id=%r)" % (
                self.limit,
                self.permits,
                self.wait,
                self.spacing,
                self.expires_in,
                self.duplicate,
                self.request_id,
            )
        return "Grant(granted=False, limit=%r, permits=%d, retry_after=%.6f, duplicate=%r, request_id=%r)" % (
            self.limit,
            self.permits,
            self.retry_after,
            self.duplicate,
            self.request_id,
        )

    def __bool__(self) -> bool:
        return self.granted

    @property
    def spaced(self) -> bool:
        """Whether the permits must be used one by one, at their own slots
        (more than one permit, ``spacing`` > 0)."""
        return self.spacing > 0 and self.permits > 1

    def ready_at(self, permit: int = 0) -> float:
        """When permit ``permit`` (0-based) may be used: ``received_at +
        wait + permit * spacing``."""
        return self.received_at + self.wait + permit * self.spacing

    def expires_at(self, permit: int = 0) -> Optional[float]:
        """When permit ``permit`` stops being usable: ``sent_at + expires_in
        + permit * spacing``, or ``None`` when the permits do not expire. A
        replayed grant that had already expired expires at ``sent_at``."""
        if self.expires_in is None:
            return None
        if self.expires_in < 0:
            return self.sent_at
        return self.sent_at + self.expires_in + permit * self.spacing

    def _check(self, permit: Optional[int]) -> int:
        if not self.granted:
            raise Throttled(
                "limit %r: waiting on a refused grant" % self.limit,
                limit=self.limit,
                retry_after=self.retry_after,
                error=self.error,
                keys_full=self.keys_full,
            )
        if permit is None:
            if self.spaced:
                raise SpacedGrant(
                    "limit %r: the %d permits of this grant are %.6fs apart and must be used one by one"
                    % (self.limit, self.permits, self.spacing)
                )
            return 0
        if not isinstance(permit, int) or permit < 0 or permit >= self.permits:
            raise InvalidRequest("permit %r of a grant of %d; allowed: 0 to %d" % (permit, self.permits, self.permits - 1))
        return permit

    def _expired_check(self, j: int) -> None:
        exp = self.expires_at(j)
        now = time.monotonic()
        if exp is not None and now > exp:
            raise Expired(
                "limit %r: permit %d expired %.6fs before it could be used" % (self.limit, j, now - exp)
            )
        self.checked_at = now

    def sleep(self, permit: Optional[int] = None) -> None:
        """Sleeps until the grant's permits may be used together, or with an
        index, until permit ``permit`` may be used; use it right after this
        returns, and each permit once.

        Raises:
            Expired: the permit expired before this returned (do not use it).
            Throttled: the grant is a refusal.
            SpacedGrant: without an index, for a grant whose permits must be
                used one by one (a strict limit's grant of several permits).
        """
        j = self._check(permit)
        sleep_until(self.ready_at(j))
        self._expired_check(j)

    async def asleep(self, permit: Optional[int] = None) -> None:
        """:meth:`sleep` for asyncio: waits with :func:`asyncio.sleep`, never
        blocking the event loop."""
        j = self._check(permit)
        await asleep_until(self.ready_at(j))
        self._expired_check(j)

    def usable_now(self, permit: int = 0) -> bool:
        """Whether permit ``permit`` may be used right now (granted, its slot
        reached, not expired)."""
        if not self.granted or permit < 0 or permit >= self.permits:
            return False
        now = time.monotonic()
        exp = self.expires_at(permit)
        return now >= self.ready_at(permit) and (exp is None or now <= exp)
