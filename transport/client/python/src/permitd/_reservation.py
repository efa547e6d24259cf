"""Reservations: the answer to a reserve of several limits at once
(:class:`Reservation`), and what settling one did (:class:`Settlement`)."""

from __future__ import annotations

import collections.abc
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Tuple, Union

from ._errors import Expired, InvalidRequest, NotFound, PermitdError, Throttled
from ._grant import Grant

if TYPE_CHECKING:  # pragma: no cover
    from ._client import Client

__all__ = ["Reservation", "Settlement", "SettledLimit"]

#: Permits per limit, as a mapping or as (name, permits) pairs.
Parts = Union[Mapping[str, int], List[Tuple[str, int]], Tuple[Tuple[str, int], ...]]


class SettledLimit:
    """What a settlement did to one limit of a reservation.

    Attributes:
        name: the limit's name.
        reserved: the permits the reservation held of it.
        actual: the permits reported as used.
        refunded: the permits that went back to the limit (unused permits
            of a rate limit that nothing else touched since the grant, or
            of a bursty limit as far as its burst allows, or in-flight
            permits released).
        charged: the permits added to the limit as debt (an overrun).
    """

    __slots__ = ("name", "reserved", "actual", "refunded", "charged")

    def __init__(self, name: str, reserved: int, actual: int, refunded: int, charged: int) -> None:
        self.name = name
        self.reserved = reserved
        self.actual = actual
        self.refunded = refunded
        self.charged = charged

    def __repr__(self) -> str:
        return "SettledLimit(name=%r, reserved=%d, actual=%d, refunded=%d, charged=%d)" % (
            self.name,
            self.reserved,
            self.actual,
            self.refunded,
            self.charged,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SettledLimit):
            return NotImplemented
        return all(getattr(self, a) == getattr(other, a) for a in self.__slots__)


class Settlement:
    """The answer to :meth:`Client.settle`.

    Attributes:
        reservation_id: the reservation settled.
        duplicate: the server had already applied this settlement (a retry
            with the same request ID) and replayed its result.
        limits: what the settlement did, by limit name (every limit of the
            reservation, in the reservation's order).
        request_id: the idempotency key the settlement carried.
        server: the base URL of the server that answered.
    """

    __slots__ = ("reservation_id", "duplicate", "limits", "request_id", "server")

    def __init__(
        self,
        reservation_id: str,
        duplicate: bool,
        limits: Dict[str, SettledLimit],
        request_id: str,
        server: str,
    ) -> None:
        self.reservation_id = reservation_id
        self.duplicate = duplicate
        self.limits = limits
        self.request_id = request_id
        self.server = server

    def __repr__(self) -> str:
        return "Settlement(reservation_id=%r, duplicate=%r, limits=%r)" % (
            self.reservation_id,
            self.duplicate,
            list(self.limits.values()),
        )


class Reservation(Grant):
    """The answer to :meth:`Client.reserve_many`: a :class:`Grant` of every
    limit asked for, all at one time, or a refusal naming the limit that
    blocked. It is also a context manager (``with`` and ``async with``)::

        with client.reserve_many({"rpm": 1, "tpm": estimate}, max_wait=2) as r:
            used = call_model()
            r.settle(tpm=used)

    Entering sleeps until the grant may be used (:meth:`Grant.sleep`); a
    refusal raises :class:`Throttled` (its ``limit`` is the blocking
    limit, its ``retry_after`` the server's), as :meth:`Client.acquire`
    does when it gives up. A grant that expired before the body could start
    is settled as unused (best effort: what can go back goes back, in-flight
    permits are freed) and :class:`Expired` is raised.

    Leaving releases the reservation's in-flight permits (:meth:`release`:
    one more request to the register, made only when the grant said it
    ``holds`` any; a reservation already final is ignored). It does not settle: a body that
    did not call :meth:`settle` leaves the reservation as reserved (every
    permit counted as used), and so does a body that raised. A release that
    fails is raised unless the body raised.

    Besides :class:`Grant`'s attributes (``limit`` is the limits' names
    joined by commas, ``permits`` the sum of their permits; ``spacing`` is
    non-zero only for a reservation of one limit):

    Attributes:
        reservation_id: (granted) the reservation's ID, for
            :meth:`Client.settle` and :meth:`Client.release` (a decimal
            string); ``""`` when refused.
        blocking: (refused) the limit that could serve its part last (the
            one to wait for), or ``None``.
        limits: the permits asked for, by limit name, in the request's
            order.
        settlement: the :class:`Settlement` of :meth:`settle` on this
            object, or ``None``.
        released: the permits :meth:`release` on this object freed, or
            ``None`` before it.
        holds: (granted) the reservation holds in-flight permits (a
            concurrency limit): only then does a release free anything.
        hold_expires_in: (granted, ``holds``) seconds after ``sent_at`` at
            which the reservation's in-flight hold lapses in the register
            (the earliest, over several concurrency limits), counted
            conservatively (from the request's sending plus the time the
            server held it): never later than the register frees the
            slot, unless released earlier. It differs from
            ``expires_in`` (the earliest expiry of every part: a strict
            limit's permit expires sooner) and may be shorter than the
            limit's TTL (a reserve that waited in the cap's queue holds
            its slot from the instant it came free). Negative: lapsed
            already (a late replay); ``None`` when the reservation holds
            nothing. See :meth:`hold_expires_at`.
    """

    __slots__ = ("reservation_id", "blocking", "limits", "settlement", "released", "holds", "hold_expires_in", "_client")

    def __init__(
        self,
        *,
        limits: Dict[str, int],
        reservation_id: str = "",
        blocking: Optional[str] = None,
        client: Optional["Client"] = None,
        **grant: Any,
    ) -> None:
        super().__init__(limit=",".join(limits), permits=sum(limits.values()), **grant)
        self.reservation_id = reservation_id
        self.blocking = blocking
        self.limits = limits
        self.settlement: Optional[Settlement] = None
        self.released: Optional[int] = None
        self.holds = False
        self.hold_expires_in: Optional[float] = None
        self._client = client

    def __repr__(self) -> str:
        if self.granted:
            return "Reservation(granted=True, reservation_id=%r, limits=%r, wait=%.6f, expires_in=%r, duplicate=%r, request_id=%r)" % (
                self.reservation_id,
                self.limits,
                self.wait,
                self.expires_in,
                self.duplicate,
                self.request_id,
            )
        return "Reservation(granted=False, limits=%r, blocking=%r, retry_after=%.6f, duplicate=%r, request_id=%r)" % (
            self.limits,
            self.blocking,
            self.retry_after,
            self.duplicate,
            self.request_id,
        )

    def hold_expires_at(self) -> Optional[float]:
        """When the reservation's in-flight hold lapses, on the clock of
        ``sent_at``: ``sent_at + hold_expires_in`` (``sent_at`` if it had
        lapsed), or ``None`` when it holds nothing. A call that uses the
        slot should end before it."""
        if self.hold_expires_in is None:
            return None
        if self.hold_expires_in < 0:
            return self.sent_at
        return self.sent_at + self.hold_expires_in

    # -- settle and release ------------------------------------------------

    def _owner(self) -> "Client":
        if not self.granted or not self.reservation_id:
            raise InvalidRequest("reserve of %s was refused: there is no reservation to settle or release" % self.limit)
        if self._client is None:
            raise InvalidRequest("reservation %s has no client; use Client.settle and Client.release" % self.reservation_id)
        return self._client

    @staticmethod
    def _actual(actual: Optional[Parts], permits: Dict[str, int]) -> List[Tuple[str, int]]:
        out: List[Tuple[str, int]] = []
        if actual is not None:
            out.extend(actual.items() if isinstance(actual, collections.abc.Mapping) else actual)
        out.extend(permits.items())
        return out

    def settle(self, actual: Optional[Parts] = None, /, **permits: int) -> Settlement:
        """Settles this reservation (:meth:`Client.settle`): the permits
        actually used per limit, as a mapping, as keyword arguments
        (``r.settle(tpm=2300)``) or both; a limit not named used what it
        reserved. Returns the :class:`Settlement` and keeps it in
        ``settlement``."""
        s = self._owner().settle(self.reservation_id, self._actual(actual, permits))
        self.settlement = s
        return s

    async def asettle(self, actual: Optional[Parts] = None, /, **permits: int) -> Settlement:
        """:meth:`settle` for asyncio."""
        s = await self._owner().asettle(self.reservation_id, self._actual(actual, permits))
        self.settlement = s
        return s

    def release(self) -> int:
        """Frees the in-flight permits this reservation holds
        (:meth:`Client.release`) and returns how many; keeps it in
        ``released``."""
        n = self._owner().release(self.reservation_id)
        self.released = n
        return n

    async def arelease(self) -> int:
        """:meth:`release` for asyncio."""
        n = await self._owner().arelease(self.reservation_id)
        self.released = n
        return n

    # -- the context manager -----------------------------------------------

    def _refused(self) -> Throttled:
        return Throttled(
            "reserve of %s: refused%s" % (self.limit, "" if not self.blocking else "; limit %r blocks" % self.blocking),
            limit=self.blocking or self.limit,
            retry_after=self.retry_after,
            error=self.error,
            status=429,
            server=self.server or None,
            keys_full=self.keys_full,
        )

    def _unused(self) -> List[Tuple[str, int]]:
        return [(name, 0) for name in self.limits]

    def __enter__(self) -> "Reservation":
        if not self.granted:
            raise self._refused()
        try:
            self.sleep()
        except Expired:
            try:
                self.settle(self._unused())
            except PermitdError:
                pass
            raise
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self.released is not None or not self.granted or not self.holds:
            return None
        try:
            self.release()
        except NotFound:
            pass  # final already: its holds are over
        except PermitdError:
            if exc_type is None:
                raise
        return None

    async def __aenter__(self) -> "Reservation":
        if not self.granted:
            raise self._refused()
        try:
            await self.asleep()
        except Expired:
            try:
                await self.asettle(self._unused())
            except PermitdError:
                pass
            raise
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self.released is not None or not self.granted or not self.holds:
            return None
        try:
            await self.arelease()
        except NotFound:
            pass
        except PermitdError:
            if exc_type is None:
                raise
        return None
