"""HttpBackend: the idblocks API over HTTP, for threads, on urllib3.

Every operation (allocate, next and the admin routes) is idblocks.operations',
shared with AsyncHttpBackend; each request's attempts and retries are
idblocks.exchange's. What is this module's own is only how a request goes on
the network and how a retry waits: a urllib3 connection pool, time.sleep
(the RetryPolicy's), and fresh connections in a forked child and after a
restore from a snapshot (idblocks.snapstart).

    backend = HttpBackend("https://abc123.execute-api.eu-west-1.amazonaws.com/v1", auth=IamAuth())
    block = backend.allocate("orders", 100)
    backend.create("invoices", start=1000)
"""

from __future__ import annotations

import os
import weakref
from typing import Any, TypeVar, cast

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.exceptions import ConnectTimeoutError, HTTPError, NewConnectionError

# Names this module has always offered, now each in the module of its concern.
from idblocks import snapstart
from idblocks.auth import ApiKeyAuth, Auth, IamAuth, NoAuth
from idblocks.block import Backend, Block
from idblocks.exchange import Attempt, Call, NoReply, Reply, cannot_connect, exchange
from idblocks.operations import Operations
from idblocks.routes import check_name

__all__ = ["ApiKeyAuth", "Auth", "Backend", "Block", "HttpBackend", "IamAuth", "NoAuth", "check_name"]

T = TypeVar("T")


class HttpBackend(Operations[Block, int, dict[str, Any], None]):
    """``HttpBackend(endpoint, *, auth=None, timeout=10.0, retry=None, pool_size=10)``:
    the API over HTTP for threads: ``allocate`` (what a Sequence needs),
    ``next``, and the admin operations, each answering at once. ``auth``:
    NoAuth() (the default), ApiKeyAuth(key) or IamAuth(); ``timeout``:
    seconds for each attempt's answer; ``retry``: the RetryPolicy of every
    request; ``pool_size``: connections kept open. A malformed endpoint or
    region, or an auth that is not one, raises ConfigurationError here.
    Safe to share between threads; a forked child gets connections of its own."""

    def _open(self) -> None:
        self._http = self._new_pool()
        _live_backends.add(self)

    def _new_pool(self) -> urllib3.PoolManager:
        timeout = urllib3.Timeout(connect=min(self.timeout, 5.0), read=self.timeout)
        pools = urllib3.PoolManager(maxsize=self.pool_size, retries=False, timeout=timeout)
        # urllib3 keeps the pool classes on each PoolManager so that one may have its own.
        pools.pool_classes_by_scheme = _RESTORE_CHECKED_POOLS
        return pools

    def _after_fork_in_child(self) -> None:
        # The pool's idle keep-alive connections are the parent's sockets too:
        # a child sending on one could read the parent's answer (its block)
        # and the parent the child's. The child opens its own. The inherited
        # pool is dropped, not closed: closing is the parent's business.
        self._http = self._new_pool()
        # So is the state of the retry jitter's generator: reseeded, so that
        # copies of one process do not retry in step.
        self.retry.rng.seed()

    def _perform(self, call: Call[T]) -> T:
        steps = exchange(self.endpoint, self.retry, call, self.contact)
        outcome: Reply | NoReply | None = None
        try:
            while True:
                step = steps.send(outcome)
                if isinstance(step, Attempt):
                    outcome = self._attempt(step)
                else:
                    self.retry.sleep(step)
                    outcome = None
        except StopIteration as done:
            return cast(T, done.value)  # what exchange() returned

    def _attempt(self, attempt: Attempt) -> Reply | NoReply:
        try:
            signed = {**attempt.headers, **self.auth.headers(attempt.method, attempt.url, attempt.data)}
            # What the connection checks before it writes (_RestoreChecked).
            with snapstart.requests_begun_at(attempt.begun):
                response = self._http.request(
                    attempt.method, attempt.url, body=attempt.data, headers=signed, redirect=False
                )
        except snapstart.RestoredSinceBegun as exc:
            return NoReply(str(exc), exc, sent=False)
        except (NewConnectionError, ConnectTimeoutError) as exc:
            return NoReply(cannot_connect(self.endpoint, exc), exc, sent=False)
        except HTTPError as exc:
            return NoReply(f"{type(exc).__name__} talking to {self.endpoint}: {exc}", exc, sent=True)
        return Reply(response.status, response.data, response.headers.get("Retry-After"))

    def close(self) -> None:
        """Close the connections kept open (a later request opens new ones)."""
        self._http.clear()


class _ShownAsUrllib3:
    """urllib3's errors name a connection, or a pool, by its class; the
    messages a caller reads keep the names of urllib3's own."""

    shown_as = ""

    def __str__(self) -> str:
        where: Any = self
        return f"{self.shown_as}(host={where.host!r}, port={where.port!r})"


class _RestoreChecked(_ShownAsUrllib3, HTTPConnection):
    """A connection that writes a request only if no restore from a snapshot
    came since the request began (idblocks.snapstart): the thread may have
    waited across the snapshot while it signed, resolved the host's name or
    connected. So it connects first, if it has not yet (urllib3 would, on
    the first write), then checks, then writes."""

    shown_as = "HTTPConnection"

    def request(self, *args: Any, **kwargs: Any) -> None:
        if self.sock is None:
            self.connect()
        snapstart.check_not_restored_since()
        super().request(*args, **kwargs)


class _RestoreCheckedTLS(_RestoreChecked, HTTPSConnection):
    """The same over TLS (urllib3 connects, and shakes hands, before it asks
    the connection to write)."""

    shown_as = "HTTPSConnection"


class _RestoreCheckedPool(_ShownAsUrllib3, urllib3.HTTPConnectionPool):
    ConnectionCls = _RestoreChecked
    shown_as = "HTTPConnectionPool"


class _RestoreCheckedTLSPool(_ShownAsUrllib3, urllib3.HTTPSConnectionPool):
    ConnectionCls = _RestoreCheckedTLS
    shown_as = "HTTPSConnectionPool"


_RESTORE_CHECKED_POOLS = {"http": _RestoreCheckedPool, "https": _RestoreCheckedTLSPool}


# Every HttpBackend in the process, so that a forked child can give each one
# connections of its own (urllib3 does nothing on fork).
_live_backends: weakref.WeakSet[HttpBackend] = weakref.WeakSet()


def _backends_after_fork_in_child() -> None:
    for backend in list(_live_backends):
        backend._after_fork_in_child()


@snapstart.on_restore
def _backends_after_restore() -> None:
    # As in a forked child; and the connections kept open at the snapshot are
    # closed, as no other process here owns them.
    for backend in list(_live_backends):
        snapshot_pool = backend._http
        backend._after_fork_in_child()
        snapshot_pool.clear()


os.register_at_fork(after_in_child=_backends_after_fork_in_child)
