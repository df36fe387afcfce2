"""The numbers at scale: one counter item under 1 to 10,000 clients, in
simulated time (a discrete-event simulation), for every way of taking IDs.

    python -m bench scale      (make bench runs all benchmarks)

Writes bench/results/scale.json (a flat object) and bench/results/scale.png.

THE MODEL (every figure below is a constant of this module; challenge them here)

The counter item. DynamoDB gives one partition, and so one item, about 1,000
write units per second; adaptive capacity can put a hot item on a partition
of its own but never lifts that ceiling. It is modelled as a token bucket:
WRITE_BUDGET (1,000) tokens per second, holding at most BURST (1,000, one
second's worth), one token per admitted write. So in any window of w seconds
the item admits at most BURST + WRITE_BUDGET * w writes, and 1,000/s on
average. Table-level burst capacity and on-demand scaling are not modelled:
they never raise one item's ceiling. A throttled attempt uses no token (it is
not a write) and is answered ProvisionedThroughputExceededException.

What a request costs (lognormal, given as median and sigma of the log):
  - GATEWAY: the round trip client -> API Gateway -> Lambda and back, outside
    the handler: median 20 ms, sigma 0.35 (p99.9 about 60 ms); half of it on
    the way in, half on the way out;
  - HANDLER: the handler's own work: median 1 ms, sigma 0.3;
  - DYNAMODB: one DynamoDB call, answered or throttled: median 5 ms, sigma 0.5.
    A request with an Idempotency-Key (every block request a Sequence sends)
    makes two more calls, on the idempotency table (record the request, then
    its answer): they add latency and hold the environment, but are other
    items, so they do not count against the counter's budget;
  - COLD_START: a new function environment: median 300 ms, sigma 0.3.
Functions: an environment serves one request at a time; a request takes the
idle environment used most recently (Lambda's choice is not documented; this
one packs the load on the fewest environments) or starts a new one; at most
CONCURRENCY (1,000, Lambda's default regional quota) environments exist, and a
request beyond them is refused at once (counted as throttled; a Sequence
retries it as it retries a 429, without Retry-After). Lambda's scaling rate,
API Gateway's account quota (10,000 requests/s by default) and the stage's
own throttling (ThrottlingRateLimit, 500/s by default) are NOT modelled: the
point here is the counter item; a deployment serving more than those needs
them raised.

Throttling, as the service does it (idblocks_core.dal.dynamodb): a
throttled write is tried up to THROTTLED_ATTEMPTS (2) times in all, after a
backoff uniform in [0, 50 ms * 2^(k-1)], while the function's time (the
template's default FunctionTimeout, 15 s) allows; then the request is
answered 503 with Retry-After: 1. A Sequence's backend (its RetryPolicy: the
real object, with a seeded generator) retries a 503 or a refusal after
``RetryPolicy.delay``, up to its attempts and deadline; a Sequence whose
request still failed repeats it (same count and key) while its caller waits.
How many attempts of a block request were refused (503s and refusals, as
HttpBackend counts 503s and 429s) goes to the real BlockSizer.contended when
the request ends, answered or not, where a Sequence passes it on.

Clients join at uniformly random times during the first RAMP seconds, and
every figure is over the window from WARM_UP to END seconds (so start-up is
in the run but not in the figures, except IDs unused, counted at the end,
and last_throttled_s, when the item last refused a write):
  - `next` callers (modes next, next_cache_*) each want NEXT_RATE (20) IDs/s,
    Poisson, one request per ID, as curl and browsers call it: no
    Idempotency-Key, one attempt (a 503 or a refusal is an ID not had;
    retrying callers would add load, never IDs: the item's budget caps what
    is served). 10,000 of them ask for 200,000 IDs/s. Cached next runs the
    service's real policy (NextCache, one per environment) with the
    counter's cache of 100 or 1,000;
  - block clients (client_*) each consume BLOCK_RATE (10,000) IDs/s, steadily
    (10,000 of them want 10^8 IDs/s), from a Sequence's blocks: the real
    BlockSizer (of a real Sequence, built with the library's defaults or a
    fixed block_size) sizes each request, and the Sequence's own
    prefetch_tail decides when the next block is asked for. Demand is not
    simulated ID by ID but as a rate: the times a block crosses its prefetch
    mark or runs out are computed. Demand that finds no ID waits (its callers
    block in next_id) and is served first, oldest first, when a block lands.
A run is reproducible: one generator per (mode, clients), seeded from SEED.

What is measured, over the window: IDs/s served and the share of demand met;
item writes/s (writes the item admitted); requests throttled (HTTP answers
503 or refused for concurrency, as a share of all answers) and write attempts
throttled (as DynamoDB saw them); the p99.9 wait for an ID (from wanting it
to having it; an ID still awaited at the end counts with the wait so far, and
the figure is then marked a lower bound); IDs left unused at the end (taken
from the item, never handed out: held in blocks or caches, or in flight).
Not modelled: network failures, lost responses and replays (each has its own
proof suite), several counters, DynamoDB's latency under load.
"""

from __future__ import annotations

import heapq
import inspect
import itertools
import math
import random
import time
from array import array
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bench.common import machine_facts, use_core_layer, write_results
from idblocks.retry import RetryPolicy
from idblocks.sequence import MAX_RUNWAY, Sequence, prefetch_tail, smoothed_latency

use_core_layer()

from idblocks_core.dal.dynamodb import (  # noqa: E402
    CONNECT_TIMEOUT_SECONDS,
    MIN_READ_TIMEOUT_SECONDS,
    RESPONSE_MARGIN_SECONDS,
    THROTTLED_ATTEMPTS,
    THROTTLING_BACKOFF_BASE_SECONDS,
)
from idblocks_core.domain.errors import CacheBelowCount, ServiceUnavailable  # noqa: E402
from idblocks_core.domain.model import Block  # noqa: E402
from idblocks_core.logic.next_cache import NextCache  # noqa: E402

SEED = 20261123
WRITE_BUDGET = 1_000.0  # writes/s one item admits
BURST = 1_000.0  # writes the bucket holds: one second's worth
FUNCTION_TIMEOUT = 15.0  # s, the template's default FunctionTimeout
CONCURRENCY = 1_000  # function environments at most
# 503's Retry-After, as the service sends it.
RETRY_AFTER = float(ServiceUnavailable("throttled").retry_after_seconds)
NEXT_RATE = 20.0  # IDs/s each next caller wants
BLOCK_RATE = 10_000.0  # IDs/s each block client consumes
CLIENT_COUNTS = (1, 10, 100, 1_000, 10_000)
COUNTER = "orders"


@dataclass(frozen=True)
class Lognormal:
    median: float  # seconds
    sigma: float  # of the log

    def draw(self, rng: random.Random) -> float:
        return math.exp(math.log(self.median) + self.sigma * rng.gauss()) if self.sigma else self.median


@dataclass(frozen=True)
class Run:
    """How long a run lasts and what of it is measured (seconds)."""

    ramp: float  # clients join during [0, ramp)
    warm_up: float  # the figures start here
    end: float


@dataclass(frozen=True)
class Model:
    write_budget: float = WRITE_BUDGET
    burst: float = BURST
    gateway: Lognormal = Lognormal(0.020, 0.35)
    handler: Lognormal = Lognormal(0.001, 0.3)
    dynamodb: Lognormal = Lognormal(0.005, 0.5)
    cold_start: Lognormal = Lognormal(0.300, 0.3)
    concurrency: int = CONCURRENCY
    function_timeout: float = FUNCTION_TIMEOUT
    # The store's retry of a throttled write: attempts in all, and the
    # backoff's base (as idblocks_core.dal.dynamodb has them).
    throttled_attempts: int = THROTTLED_ATTEMPTS
    throttle_backoff_base: float = THROTTLING_BACKOFF_BASE_SECONDS
    next_rate: float = NEXT_RATE
    block_rate: float = BLOCK_RATE
    # Block clients: thousands of them joining at once take a minute or more
    # of the item's budget just to grow their blocks (about six requests each
    # from 100 to the largest), and a block of the largest size lasts 100 s:
    # the window starts once that is over. Next callers reach their steady
    # state within seconds of joining.
    block_run: Run = Run(ramp=20.0, warm_up=120.0, end=240.0)
    # Adaptive clients, once more for long: their sizer carries the start-up
    # (see long_runs) for many blocks of 100 s.
    long_block_run: Run = Run(ramp=20.0, warm_up=1_200.0, end=1_800.0)
    next_run: Run = Run(ramp=1.0, warm_up=2.0, end=6.0)
    # After the window, nothing more is wanted; requests under way get this
    # long to be answered (an ID that is not is counted as still awaited).
    drain: float = 2.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)


@dataclass(frozen=True)
class Mode:
    """How clients take IDs: ``next`` per ID (``cache`` None: a write per
    request; else the counter's cache setting), or a Sequence's blocks
    (``block_size`` None: adaptive)."""

    name: str
    label: str
    next_route: bool
    cache: int | None = None
    block_size: int | None = None
    runway: float | None = None  # None: the Sequence's default


MODES = (
    Mode("next", "next, one write per ID", next_route=True),
    Mode("next_cache_100", "next, cache 100", next_route=True, cache=100),
    Mode("next_cache_1000", "next, cache 1,000", next_route=True, cache=1_000),
    Mode("client_fixed_100", "client, fixed blocks of 100", next_route=False, block_size=100),
    Mode("client_fixed_10000", "client, fixed blocks of 10,000", next_route=False, block_size=10_000),
    Mode("client_adaptive", "client, adaptive (defaults)", next_route=False),
    # Not one of the modes the goals are judged on: the same client with a
    # longer runway, to show what the setting changes.
    Mode("client_adaptive_runway_100", "client, adaptive, runway 100 s", next_route=False, runway=100.0),
)
MODES_BY_NAME = {mode.name: mode for mode in MODES}

OK, UNAVAILABLE, REFUSED = "ok", "unavailable", "refused"


# -- the machinery ----------------------------------------------------------------


class TokenBucket:
    """The item's write budget: ``rate`` tokens a second, at most
    ``capacity`` held. Times must not go backwards."""

    def __init__(self, rate: float, capacity: float) -> None:
        self.rate, self.capacity = rate, capacity
        self.tokens, self.last = capacity, 0.0

    def admit(self, now: float) -> bool:
        self.tokens = min(self.capacity, self.tokens + (now - self.last) * self.rate)
        self.last = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


class Simulation:
    """Simulated time: callbacks run in time order (ties in the order they
    were scheduled)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.events = 0
        self._queue: list[tuple[float, int, Callable[..., None], tuple[Any, ...]]] = []
        self._order = itertools.count()

    def at(self, when: float, action: Callable[..., None], *args: Any) -> None:
        heapq.heappush(self._queue, (when, next(self._order), action, args))

    def run(self, until: float) -> None:
        queue, pop = self._queue, heapq.heappop
        while queue and queue[0][0] <= until:
            when, _, action, args = pop(queue)
            self.now = when
            self.events += 1
            action(*args)
        self.now = until


class Stats:
    """Everything measured. Only what happens in [start, end] counts, except
    the IDs taken and served in all, whose difference is what is unused."""

    def __init__(self, start: float, end: float) -> None:
        self.start, self.end = start, end
        self.writes = 0  # admitted by the item, in the window
        self.write_attempts = 0
        self.write_attempts_throttled = 0
        self.answers = 0  # HTTP answers the clients got
        self.answers_throttled = 0
        self.demand = 0.0  # IDs wanted in the window
        self.served = 0.0  # IDs handed out in the window
        self.taken = 0  # IDs the item handed out, in all
        self.served_total = 0.0  # IDs the clients handed out, in all
        # Waits of IDs wanted in the window: one per ID (next), or a share of
        # IDs whose waits spread evenly over [low, high] (block clients).
        self.point_waits = array("d")
        self.spread: list[tuple[float, float, float]] = []
        self.censored = 0.0  # IDs still awaited at the end
        self.last_throttled = 0.0  # when the item last refused a write

    def within(self, when: float) -> bool:
        return self.start <= when <= self.end

    def wait_p999(self) -> tuple[float, bool]:
        """The wait that 99.9 % of the demand in the window got, and whether
        it is only a lower bound (more than 0.1 % still waited at the end)."""
        import numpy as np

        total = self.demand
        if total <= 0:
            return 0.0, False
        points = np.frombuffer(self.point_waits, dtype=np.float64) if self.point_waits else np.zeros(0)
        lows = np.array([s[0] for s in self.spread], dtype=np.float64)
        highs = np.array([s[1] for s in self.spread], dtype=np.float64)
        counts = np.array([s[2] for s in self.spread], dtype=np.float64)
        allowed = 0.001 * total

        def above(wait: float) -> float:
            width = np.maximum(highs - lows, 1e-12)
            share = np.clip((highs - wait) / width, 0.0, 1.0)
            return float((points > wait).sum()) + float((counts * share).sum())

        highest = max(points.max() if points.size else 0.0, highs.max() if highs.size else 0.0)
        if above(0.0) <= allowed:
            return 0.0, self.censored > allowed
        low, high = 0.0, highest
        for _ in range(60):
            middle = (low + high) / 2
            if above(middle) > allowed:
                low = middle
            else:
                high = middle
        return high, self.censored > allowed


# -- the service ---------------------------------------------------------------------


class _WriteNeeded(Exception):
    """Raised by an environment's reserve callable when the policy wants a
    block the simulation has not written yet: the write then happens in
    simulated time, and the policy is asked again with the block."""

    def __init__(self, count: int) -> None:
        super().__init__(count)
        self.count = count


class Environment:
    """One function environment. With a cache, it holds the service's real
    policy (NextCache), whose reserve callable is this environment's. Its
    blocks carry no token, so an expired block is never kept (as if another
    environment had written since): that only ever costs IDs, never a
    write these runs do not count."""

    def __init__(self, sim: Simulation, cache: int | None) -> None:
        self.sim = sim
        self.cache = cache
        self.written: Block | None = None
        self.pinned: float | None = None
        self.policy = NextCache(self._reserve, _never_kept, clock=self._clock) if cache is not None else None

    def _clock(self) -> float:
        return self.sim.now if self.pinned is None else self.pinned

    def _reserve(self, name: str, count: int) -> Block:
        assert self.cache is not None
        if count > self.cache:  # the store's write refuses it, naming the setting
            raise CacheBelowCount(name, count, self.cache)
        block, self.written = self.written, None
        if block is None:
            raise _WriteNeeded(count)
        if count != block.count:
            raise AssertionError(f"the policy asked for {count} IDs, then for {block.count}")
        return block

    def serve_from_memory(self) -> int | None:
        """The number of IDs to write first (None: served from memory)."""
        assert self.policy is not None
        try:
            self.policy.next_id(COUNTER)
        except _WriteNeeded as needed:
            return needed.count
        return None

    def serve_written(self, block: Block, write_began: float) -> None:
        """The block written for this request: the policy takes it as if its
        reserve had returned it, at the time the write began."""
        assert self.policy is not None
        self.written, self.pinned = block, write_began
        try:
            served = self.policy.next_id(COUNTER)
        finally:
            self.pinned = None
        if served.taken is not block:
            raise AssertionError("the policy did not serve from the block written for it")


def _never_kept(name: str, end: int, token: str) -> bool:
    return False


# answer(status, when): how a request ended and when its answer reaches the
# client. Called as soon as that is known (possibly ahead of ``when``): a
# client whose state changes on the answer schedules that for ``when``.
Answer = Callable[[str, float], None]


class _Request:
    __slots__ = ("answer", "back", "count", "environment", "invoked", "keyed", "write_began")

    def __init__(self, count: int, keyed: bool, answer: Answer, back: float) -> None:
        self.count, self.keyed, self.answer, self.back = count, keyed, answer, back
        self.environment: Environment | None = None
        self.invoked = 0.0
        self.write_began = 0.0


class Service:
    """API Gateway, one function's environments and the counter item. A
    request asks for ``count`` IDs (a block, or next's one ID). Only what
    touches shared state (the idle environments, the item's budget) is an
    event; the rest of a request is computed ahead."""

    def __init__(self, sim: Simulation, model: Model, rng: random.Random, stats: Stats, cache: int | None):
        self.sim, self.model, self.rng, self.stats, self.cache = sim, model, rng, stats, cache
        self.bucket = TokenBucket(model.write_budget, model.burst)
        self.idle: list[Environment] = []
        self.environments = 0
        self.hwm = 0  # the item's last ID handed out

    def call(self, count: int, keyed: bool, answer: Answer, sent: float) -> None:
        """A request the client sends at ``sent`` (now or later)."""
        trip = self.model.gateway.draw(self.rng)
        request = _Request(count, keyed, answer, trip / 2)
        self.sim.at(sent + trip / 2, self._arrive, request)

    def _arrive(self, request: _Request) -> None:
        sim, model, rng = self.sim, self.model, self.rng
        if self.idle:
            environment, ready = self.idle.pop(), sim.now
        elif self.environments < model.concurrency:
            self.environments += 1
            environment, ready = Environment(sim, self.cache), sim.now + model.cold_start.draw(rng)
        else:
            request.answer(REFUSED, sim.now + request.back)
            return
        request.environment, request.invoked = environment, ready
        begins = ready + model.handler.draw(rng)
        if request.keyed:
            begins += model.dynamodb.draw(rng)  # the idempotency record, first
        sim.at(begins, self._counter, request)

    def _counter(self, request: _Request) -> None:
        environment = request.environment
        assert environment is not None
        if environment.policy is None:
            self._write(request, request.count, 1)
            return
        count = environment.serve_from_memory()
        if count is None:
            self._finish(request, OK, self.sim.now)
        else:
            request.write_began = self.sim.now
            self._write(request, count, 1)

    def _write(self, request: _Request, count: int, attempt: int) -> None:
        sim, stats = self.sim, self.stats
        now = sim.now
        latency = self.model.dynamodb.draw(self.rng)
        counted = stats.within(now)
        if counted:
            stats.write_attempts += 1
        if self.bucket.admit(now):
            if counted:
                stats.writes += 1
            block = Block(self.hwm + 1, self.hwm + count, cache=self.cache)
            self.hwm += count
            stats.taken += count
            environment = request.environment
            assert environment is not None
            if environment.policy is not None:
                # The environment is this request's alone until released.
                environment.serve_written(block, request.write_began)
            self._finish(request, OK, now + latency)
            return
        stats.last_throttled = now
        if counted:
            stats.write_attempts_throttled += 1
        backoff = self.rng.uniform(0, self.model.throttle_backoff_base * 2 ** (attempt - 1))
        left = request.invoked + self.model.function_timeout - RESPONSE_MARGIN_SECONDS - (now + latency)
        if (
            attempt == self.model.throttled_attempts
            or left - backoff < CONNECT_TIMEOUT_SECONDS + MIN_READ_TIMEOUT_SECONDS
        ):
            self._finish(request, UNAVAILABLE, now + latency)
        else:
            sim.at(now + latency + backoff, self._write, request, count, attempt + 1)

    def _finish(self, request: _Request, status: str, at: float) -> None:
        done = at + self.model.handler.draw(self.rng)
        if request.keyed:
            done += self.model.dynamodb.draw(self.rng)  # the idempotency record's answer
        self.sim.at(done, self.idle.append, request.environment)
        request.answer(status, done + request.back)


class _Call:
    """One request as the client library's HttpBackend makes it: retried on
    503 (after its Retry-After) and on refusals, as RetryPolicy decides.
    ``done(ok, when)`` is told the outcome as soon as it is known."""

    __slots__ = ("attempt", "count", "done", "env", "keyed", "refusals", "retried", "started")

    def __init__(
        self, env: _Env, count: int, keyed: bool, done: Callable[[bool, float], None], *, retried: bool = True
    ) -> None:
        self.env, self.count, self.keyed, self.done, self.retried = env, count, keyed, done, retried
        self.attempt = 0
        # Attempts refused for capacity (503, or no environment: a 429), as
        # HttpBackend counts them on the block or the failure it returns.
        self.refusals = 0
        self.started = env.sim.now
        env.service.call(count, keyed, self._answered, self.started)

    def _answered(self, status: str, when: float) -> None:
        env = self.env
        stats = env.stats
        if stats.within(when):
            stats.answers += 1
            if status != OK:
                stats.answers_throttled += 1
        if status == OK:
            self.done(True, when)
            return
        self.refusals += 1
        policy = env.policy
        self.attempt += 1
        if not self.retried or self.attempt == policy.attempts:
            self.done(False, when)
            return
        wait = policy.delay(self.attempt, RETRY_AFTER if status == UNAVAILABLE else None)
        if when - self.started + wait > policy.deadline:
            self.done(False, when)
            return
        env.service.call(self.count, self.keyed, self._answered, when + wait)


@dataclass
class _Env:
    """What every client of a run shares."""

    sim: Simulation
    service: Service
    stats: Stats
    policy: RetryPolicy
    rng: random.Random
    stop: float  # when the run stops


# -- the clients -----------------------------------------------------------------------


class NextCaller:
    """Wants ``rate`` IDs a second (Poisson) until the window ends, each from
    one next request."""

    def __init__(self, env: _Env, rate: float, joins: float) -> None:
        self.env, self.rate = env, rate
        # When each ID of the window still without one was wanted: awaited at
        # the end, or its request failed for good.
        self.unserved: dict[int, float] = {}
        self._numbers = itertools.count()
        env.sim.at(joins + env.rng.expovariate(rate), self._want)

    def _want(self) -> None:
        env = self.env
        stats = env.stats
        wanted = env.sim.now
        if wanted > stats.end:
            return
        env.sim.at(wanted + env.rng.expovariate(self.rate), self._want)
        number = next(self._numbers) if stats.within(wanted) else None
        if number is not None:
            stats.demand += 1
            self.unserved[number] = wanted

        def done(ok: bool, when: float) -> None:
            if not ok or when > env.stop:
                return  # failed for good, or not by the end: this ID is not had
            stats.served_total += 1
            if stats.within(when):
                stats.served += 1
            if number is not None:
                stats.point_waits.append(when - self.unserved.pop(number))

        # As curl and browsers call next: no Idempotency-Key, one attempt.
        _Call(env, 1, False, done, retried=False)

    def finish(self) -> None:
        stats = self.env.stats
        for wanted in self.unserved.values():
            stats.censored += 1
            stats.point_waits.append(self.env.stop - wanted)


class BlockClient:
    """A Sequence's blocks, consumed at ``rate`` IDs a second until the window
    ends. The real Sequence (never started: no thread, no backend) sizes the
    blocks with its BlockSizer and settings; its prefetch_tail decides when
    the next block is asked for."""

    def __init__(self, env: _Env, rate: float, joins: float, mode: Mode) -> None:
        self.env, self.rate, self.joins = env, rate, joins
        options = {} if mode.runway is None else {"runway": mode.runway}
        self.sequence = Sequence(_NoBackend(), COUNTER, block_size=mode.block_size, **options)
        self.latency: float | None = None  # of block requests, as the Sequence averages it
        self.ready: deque[int] = deque()  # fetched, not started (sizes)
        self.pending: int | None = None  # the size of the request made and not answered
        self.fetching = False
        self.call: _Call | None = None  # the request made and not answered
        self.sent = 0.0
        self.size = 0  # the current block, while it lasts
        self.started = 0.0  # when it started, with how many of it drawn at once
        self.drawn = 0.0
        # Demand waits from stalled_since while stalled; IDs flow from memory
        # since flowing_since otherwise (None once the demand is over).
        self.stalled = True
        self.stalled_since = joins
        self.flowing_since: float | None = None
        self.requests = 0
        env.sim.at(joins, self._exhausted)

    # A block's life: started, past its prefetch mark, used up.

    def _start(self, size: int) -> None:
        now, end = self.env.sim.now, self.env.stats.end
        sizer = self.sequence.sizer
        tail = prefetch_tail(size, self.sequence.prefetch_at, sizer.rate, self.latency, sizer.young_tail())
        self.size = size
        drawn = 0.0
        if self.stalled:
            waiting = self.rate * (min(now, end) - self.stalled_since)
            drawn = min(waiting, float(size))
            self._served_late(self.stalled_since, self.stalled_since + drawn / self.rate, drawn)
            self.stalled_since += drawn / self.rate
            if drawn >= waiting:
                self.stalled = False
                if now >= end:
                    return  # nothing more is wanted: the rest of the block stays unused
                self.flowing_since = now
        self.started, self.drawn = now, drawn
        split = size - tail
        if drawn >= split:
            self._prefetch()
        else:
            self.env.sim.at(now + (split - drawn) / self.rate, self._prefetch)
        self.env.sim.at(now + (size - drawn) / self.rate, self._exhausted)

    def _prefetch(self) -> None:
        if self.env.sim.now < self.env.stats.end and not (self.ready or self.fetching):
            self._fetch()

    def _exhausted(self) -> None:
        now, end = self.env.sim.now, self.env.stats.end
        if self.size:
            self.sequence.sizer.block_finished(self.size, now)
            self.size = 0
        if self.ready and (now < end or self.stalled):
            self._start(self.ready.popleft())
            return
        if not self.stalled:
            self._flow_ends(min(now, end))
            if now >= end:
                return
            self.stalled, self.stalled_since = True, now
        if not self.fetching:
            self._fetch()

    def _fetch(self) -> None:
        if self.pending is None:
            # The Sequence's own choice of size (with need 1, as next_id asks).
            self.pending = self.sequence._size_for(1, held=self._held())
            self.sequence.sizer.demand_from(self.env.sim.now)
        self.fetching, self.sent = True, self.env.sim.now
        self.call = _Call(self.env, self.pending, True, self._answered)

    def _held(self) -> int:
        """The IDs held now: fetched blocks not started, and what is left of
        the current one."""
        left = 0.0
        if self.size:
            left = self.size - self.drawn - self.rate * (self.env.sim.now - self.started)
        return sum(self.ready) + max(0, math.ceil(left))

    def _answered(self, ok: bool, when: float) -> None:
        call = self.call
        assert call is not None
        self.env.sim.at(when, self._landed, ok, call.refusals)

    def _landed(self, ok: bool, refusals: int) -> None:
        self.fetching = False
        # Where the Sequence tells its sizer, with what its backend counted.
        self.sequence.sizer.contended(refusals)
        if not ok:
            # The Sequence keeps the request; a caller waiting asks again.
            if self.stalled and self.size == 0:
                self._fetch()
            return
        size, self.pending = self.pending, None
        assert size is not None
        self.requests += 1
        self.sequence.sizer.landed(size)
        self.latency = smoothed_latency(self.latency, self.env.sim.now - self.sent)
        self.ready.append(size)
        if self.stalled and self.size == 0:
            self._start(self.ready.popleft())

    # What the demand got.

    def _flow_ends(self, at: float) -> None:
        if self.flowing_since is None:
            return
        stats = self.env.stats
        stats.served_total += self.rate * (at - self.flowing_since)
        overlap = min(at, stats.end) - max(self.flowing_since, stats.start)
        if overlap > 0:
            stats.served += self.rate * overlap
        self.flowing_since = None

    def _served_late(self, wanted_from: float, wanted_to: float, count: float) -> None:
        stats = self.env.stats
        now = self.env.sim.now
        stats.served_total += count
        if stats.within(now):
            stats.served += count
        low, high = max(wanted_from, stats.start), min(wanted_to, stats.end)
        if high > low:
            stats.spread.append((now - high, now - low, self.rate * (high - low)))

    def finish(self) -> None:
        """At the end of the run: the demand of the window, and what of it
        still waits (with its wait so far, a lower bound)."""
        stats = self.env.stats
        self._flow_ends(stats.end)
        low = max(self.joins, stats.start)
        if stats.end > low:
            stats.demand += self.rate * (stats.end - low)
        if self.stalled:
            waiting_from = max(self.stalled_since, low)
            if stats.end > waiting_from:
                waiting = self.rate * (stats.end - waiting_from)
                stats.censored += waiting
                now = self.env.sim.now
                stats.spread.append((now - stats.end, now - waiting_from, waiting))

    def close(self) -> None:
        self.sequence.close(timeout=0.0)


class _NoBackend:
    """A Sequence here only sizes blocks: it never asks a backend."""

    def allocate(self, counter: str, count: int, *, idempotency_key: str | None = None) -> Any:
        raise AssertionError("the simulation makes the requests")


# -- a run ----------------------------------------------------------------------------


def simulate(mode: Mode, clients: int, model: Model | None = None, seed: int = SEED) -> dict[str, Any]:
    """One mode with ``clients`` clients: its figures (see the module's docstring)."""
    model = model or Model()
    rng = random.Random(f"{seed}/{mode.name}/{clients}")
    run = model.next_run if mode.next_route else model.block_run
    sim = Simulation()
    stats = Stats(run.warm_up, run.end)
    service = Service(sim, model, rng, stats, mode.cache)
    # The real RetryPolicy, drawing its jitter from the run's generator.
    policy = replace(model.retry, rng=random.Random(rng.getrandbits(64)))
    env = _Env(sim, service, stats, policy, rng, run.end + model.drain)
    joins = sorted(rng.uniform(0.0, run.ramp) for _ in range(clients))
    callers = [NextCaller(env, model.next_rate, t) for t in joins] if mode.next_route else []
    blocks = [] if mode.next_route else [BlockClient(env, model.block_rate, t, mode) for t in joins]
    wall = time.perf_counter()
    sim.run(env.stop)
    wall = time.perf_counter() - wall
    for client in (*callers, *blocks):
        client.finish()
    for client in blocks:
        client.close()
    length = run.end - run.warm_up
    p999, lower_bound = stats.wait_p999()
    figures: dict[str, Any] = {
        "ids_per_s": round(stats.served / length, 2),
        "demand_per_s": round(stats.demand / length, 2),
        "demand_met_pct": round(100.0 * stats.served / stats.demand, 3) if stats.demand else 0.0,
        "item_writes_per_s": round(stats.writes / length, 2),
        "requests_throttled_pct": round(100.0 * stats.answers_throttled / stats.answers, 3)
        if stats.answers
        else 0.0,
        "write_attempts_throttled_pct": round(
            100.0 * stats.write_attempts_throttled / stats.write_attempts, 3
        )
        if stats.write_attempts
        else 0.0,
        "p999_wait_ms": round(1000.0 * float(p999), 3),
        "p999_wait_is_lower_bound": lower_bound,
        "unused_ids_at_end": round(stats.taken - stats.served_total),
        # How long a start-up kept the item saturated (the run's end: throughout).
        "last_throttled_s": round(stats.last_throttled, 1),
        "environments": service.environments,
        "block_requests": sum(client.requests for client in blocks),
        "events": sim.events,
        "wall_s": round(wall, 2),
    }
    return figures


def goals(results: dict[str, Any], counts: tuple[int, ...] = CLIENT_COUNTS) -> dict[str, Any]:
    """The two goals, judged on the runs with the most clients, met or not.
    Serving 10^8 IDs/s is judged as meeting 99.9 % of that demand, in the
    usual window and in the long one alike."""
    most = max(counts)
    cached = f"next_cache_1000.{most}."

    def adaptive_met(mode: str) -> bool:
        return all(
            results[prefix + "ids_per_s"] >= 1e8 * 0.999
            and results[prefix + "item_writes_per_s"] <= 100
            and results[prefix + "requests_throttled_pct"] == 0
            and results[prefix + "write_attempts_throttled_pct"] == 0
            for prefix in (f"{mode}.{most}.", f"{mode}.{most}.long.")
        )

    return {
        "goal_adaptive_1e8_ids_per_s_100_writes_no_throttling_met": adaptive_met("client_adaptive"),
        # The same goal with the runway a fleet of that size is told to set.
        "goal_adaptive_runway_100_1e8_ids_per_s_100_writes_no_throttling_met": adaptive_met(
            "client_adaptive_runway_100"
        ),
        "goal_cached_next_1000_1e5_ids_per_s_met": results[cached + "ids_per_s"] >= 1e5,
    }


def model_facts(model: Model) -> dict[str, Any]:
    facts: dict[str, Any] = {
        "seed": SEED,
        "model.write_budget_per_s": model.write_budget,
        "model.burst_writes": model.burst,
        "model.concurrency": model.concurrency,
        "model.function_timeout_s": model.function_timeout,
        "model.next_rate_per_client": model.next_rate,
        "model.block_rate_per_client": model.block_rate,
        "model.service_attempts": model.throttled_attempts,
        "model.service_throttle_backoff_base_s": model.throttle_backoff_base,
        "model.retry_after_s": RETRY_AFTER,
        "model.client_attempts": model.retry.attempts,
        "model.client_deadline_s": model.retry.deadline,
    }
    for name in ("gateway", "handler", "dynamodb", "cold_start"):
        latency: Lognormal = getattr(model, name)
        facts[f"model.{name}_median_ms"] = latency.median * 1000
        facts[f"model.{name}_sigma"] = latency.sigma
    for name in ("next_run", "block_run", "long_block_run"):
        run: Run = getattr(model, name)
        facts[f"model.{name}_ramp_s"] = run.ramp
        facts[f"model.{name}_window_s"] = f"{run.warm_up:g}-{run.end:g}"
    defaults = inspect.signature(Sequence.__init__).parameters
    for name in ("initial_block", "min_block", "max_block", "runway", "prefetch_at"):
        facts[f"model.sequence_{name}"] = defaults[name].default
    facts["model.sequence_max_runway"] = MAX_RUNWAY
    return facts


def plot(results: dict[str, Any], path: Path, counts: tuple[int, ...]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    panels = [
        (axes[0][0], "ids_per_s", "IDs/s served", True),
        (axes[0][1], "item_writes_per_s", "item writes/s (0 drawn at 10^-3)", True),
        (axes[1][0], "requests_throttled_pct", "requests throttled, %", False),
        (axes[1][1], "p999_wait_ms", "p99.9 wait for an ID, ms (triangle: lower bound; 0 at 10^-3)", True),
    ]
    for axis, metric, title, logarithmic in panels:
        for mode in MODES:
            values = [results[f"{mode.name}.{n}.{metric}"] for n in counts]
            if logarithmic:
                values = [max(v, 1e-3) for v in values]  # 0 shows at the floor
            style = "--" if mode.runway is not None else "-"
            (line,) = axis.plot(counts, values, style, marker="o", label=mode.label)
            if metric == "p999_wait_ms":
                # Demand still unmet at the end: the wait is only a lower bound.
                bounds = [
                    (n, v)
                    for n, v in zip(counts, values, strict=True)
                    if results[f"{mode.name}.{n}.p999_wait_is_lower_bound"]
                ]
                if bounds:
                    axis.plot(*zip(*bounds, strict=True), "^", color=line.get_color(), markersize=11)
        axis.set_xscale("log")
        if logarithmic:
            axis.set_yscale("log")
        axis.set_xlabel("clients")
        axis.set_title(title)
        axis.grid(True, which="both", alpha=0.3)
    axes[0][1].axhline(WRITE_BUDGET, color="red", linestyle="--", label="the item's budget")
    axes[0][1].axhline(100, color="grey", linestyle=":", label="goal for adaptive: 100")
    axes[0][0].axhline(1e8, color="grey", linestyle=":", label="goal for adaptive: 10^8")
    axes[0][0].axhline(1e5, color="grey", linestyle="-.", label="goal for cache 1,000: 10^5")
    axes[0][0].legend(fontsize=7)
    axes[0][1].legend(fontsize=7)
    fig.suptitle(
        f"One counter item, {WRITE_BUDGET:,.0f} writes/s; simulated (seed {SEED}); "
        f"next callers {NEXT_RATE:g} IDs/s each, block clients {BLOCK_RATE:,.0f} IDs/s each",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def run_all(counts: tuple[int, ...] = CLIENT_COUNTS, model: Model | None = None) -> dict[str, Any]:
    model = model or Model()
    results: dict[str, Any] = {}
    for mode in MODES:
        for clients in counts:
            figures = simulate(mode, clients, model)
            print(
                f"scale: {mode.name:>19} x {clients:>6}: {figures['ids_per_s']:>12,} IDs/s, "
                f"{figures['item_writes_per_s']:>8,} writes/s, {figures['requests_throttled_pct']:>7}% "
                f"throttled, p99.9 {figures['p999_wait_ms']:>9} ms, {figures['unused_ids_at_end']:>12,} "
                f"unused ({figures['wall_s']} s)",
                flush=True,
            )
            results |= {f"{mode.name}.{clients}.{key}": value for key, value in figures.items()}
    return results | long_runs(max(counts), model)


def long_runs(clients: int, model: Model) -> dict[str, Any]:
    """The adaptive clients over a later window. A start-up leaves callers
    waiting; when a block lands they drain it at once, and the BlockSizer
    reads that as a huge rate: blocks grow to max_block and its moving
    average takes many blocks (of 100 s each) to come back down. The usual
    window still sees those blocks; this one sees what follows."""
    results: dict[str, Any] = {}
    long_model = replace(model, block_run=model.long_block_run)
    for name in ("client_adaptive", "client_adaptive_runway_100"):
        figures = simulate(MODES_BY_NAME[name], clients, long_model)
        print(
            f"scale: {name} x {clients}, {long_model.block_run.warm_up:g}-{long_model.block_run.end:g} s: "
            f"{figures['ids_per_s']:,} IDs/s, {figures['item_writes_per_s']:,} writes/s, "
            f"{figures['requests_throttled_pct']}% throttled ({figures['wall_s']} s)",
            flush=True,
        )
        results |= {f"{name}.{clients}.long.{key}": value for key, value in figures.items()}
    return results


def main(counts: tuple[int, ...] = CLIENT_COUNTS, model: Model | None = None) -> dict[str, Any]:
    model = model or Model()
    results: dict[str, Any] = dict(machine_facts()) | model_facts(model)
    results |= run_all(counts, model)
    results |= goals(results, counts)
    path = write_results("scale", results)
    plot(results, path.with_suffix(".png"), counts)
    return results


if __name__ == "__main__":
    main()
