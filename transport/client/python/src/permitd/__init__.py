"""permitd: the Python client of permitd's permit register.

Standard library only; Python 3.9 or later.

The model
=========

permitd is a register of rate limits replicated by a small Raft cluster.
A worker that wants to call a rate-limited API first *reserves* a permit of
the limit that protects it, then uses the permit locally. The register
answers "use the permit ``wait`` seconds after you receive this answer", so
no client clock matters, only its rate: the client counts the wait on
:func:`time.monotonic` from the moment the answer arrived, which is never
earlier than the moment it left the register. A strict limit's permits
also *expire* a little after their slot; the client counts the expiry,
conservatively, from the moment it sent the request, and never uses a
permit past it (it reserves again instead). Between the two, the permits
used by a whole fleet of processes keep the limit's spacing (less the
expiry, for a caller that oversleeps).

Ways to wait for a permit:

* :meth:`Client.acquire` (and the ``"block"`` mode of :func:`throttle`, and
  ``with client.permit(limit)``): reserve ahead with ``max_wait`` = the time
  the caller still accepts to wait, sleep the granted wait, and when
  refused sleep the server's ``retry_after`` plus a small jitter and
  reserve again (raising :class:`Throttled` at once when that would end
  after the caller's timeout, which bounds failing servers too);
* :meth:`Client.try_acquire` (the ``"skip"`` mode): reserve once with a
  small ``max_wait``; when refused, give up at once.

A grant of several permits of a strict limit gives them slots one interval
apart: :meth:`Client.acquire_each` (or :meth:`Grant.sleep` with a permit
index) uses them one by one; :meth:`Client.acquire` refuses to use them
together (:class:`SpacedGrant`).

Failover and exactly-once decisions
===================================

A :class:`Client` knows several servers. A request goes to the last server
that answered; a connection error, a timeout or a 503 (no leader reachable,
overloaded) moves it to the next, backing off with jitter (and at least the
503's ``Retry-After``, up to ``backoff_max``) after each full round, for a
bounded number of rounds, after which :class:`Unavailable` is raised. Every
reserve carries a request ID (16 random bytes in hex) that stays the same
across these retries, so a reserve whose answer was lost is never granted
twice: the register answers the retry with the first decision.

Reservations: several limits, settled afterwards
================================================

:meth:`Client.reserve_many` reserves permits of up to 8 limits in one
decision, all granted at one time or none (a refusal names the
``blocking`` limit and reserves nothing anywhere), and answers with a
:class:`Reservation` whose ``reservation_id`` lets the caller settle the
real cost afterwards (:meth:`Client.settle`: unused permits go back when
they still can, an overrun is charged as debt) and free in-flight permits
of concurrency limits (:meth:`Client.release`). As a context manager it
sleeps until the grant may be used, raises :class:`Throttled` when
refused, and releases in-flight permits on the way out::

    with client.reserve_many({"rpm": 1, "tpm": estimate}, max_wait=2) as r:
        used = call_model()
        r.settle(tpm=used)

A body that does not settle leaves the reservation as reserved. The
reserve and the settlement carry request IDs kept across retries, as
:meth:`Client.reserve` does.

Asyncio
=======

:meth:`Client.areserve`, :meth:`Client.aacquire`,
:meth:`Client.atry_acquire`, :meth:`Client.aacquire_each`, ``async with
client.permit(limit)``, :meth:`Client.areserve_many` (``await`` or ``async
with``), :meth:`Client.asettle`, :meth:`Client.arelease` and :func:`throttle` on an ``async def`` run the
blocking HTTP exchange in the client's own thread pool and wait with
:func:`asyncio.sleep`: the event loop is never blocked.

Servers
=======

A client talks to the register's agents or to a worker sidecar
(``permitd worker``) alike: the sidecar serves the same reserve contract for
its one leased limit, answering once the permits are usable (``wait`` 0,
no expiry). It does not deduplicate request IDs: a reserve it answered but
whose answer was lost is counted as spent from the worker's lease. An
acquire lowers its ``max_wait`` to a sidecar's ``--max-reserve-wait`` once
that sidecar has named it in a 400.

Security: ``ca_file`` (HTTPS, verifying the agents), ``cert_file`` and
``key_file`` (a client certificate), and ``token`` or ``PERMITD_TOKEN``
(``Authorization: Bearer``).
"""

from . import _errors
from ._client import Client, PendingReservation, Permit, default_client, set_default_client
from ._errors import (
    Conflict,
    Expired,
    Forbidden,
    InvalidRequest,
    NotFound,
    PermitdError,
    SpacedGrant,
    Throttled,
    Unauthorized,
    Unavailable,
)
from ._grant import Grant
from ._reservation import Reservation, SettledLimit, Settlement
from ._throttle import BLOCK, SKIP, throttle
from ._version import __version__

__all__ = [
    "Client",
    "Grant",
    "Permit",
    "Reservation",
    "PendingReservation",
    "Settlement",
    "SettledLimit",
    "throttle",
    "BLOCK",
    "SKIP",
    "default_client",
    "set_default_client",
    "__version__",
]
__all__ += _errors.__all__  # the exceptions
