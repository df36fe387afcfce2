"""The client backs off when its counter is hot: the backend counts the
attempts of a block request refused for capacity (429, the service's 503),
the block or the failure carries that count, and the Sequence's BlockSizer
lengthens its runway for it, up to max_runway."""

from __future__ import annotations

import pytest

from idblocks import FailoverBackend, HttpBackend, RetryPolicy, Sequence, ServiceUnavailable
from idblocks.block import Block
from idblocks.sizing import MAX_RUNWAY, BlockSizer
from idblocks.testing import LOST_RESPONSE, THROTTLED, UNAVAILABLE, MemoryBackend
from tests.support.stub_http import StubServer

BLOCK = (200, {}, {"counter": "orders", "start": 101, "end": 200, "count": 100})


def error(status, code):
    return (status, {}, {"error": {"code": code, "message": f"{code} happened"}})


def no_sleep_policy(**kwargs):
    return RetryPolicy(sleep=lambda seconds: None, **kwargs)


# -- the sizer -------------------------------------------------------------------


def steady_sizer(**kwargs):
    """A sizer that has measured 1,000 IDs/s: 5 s of runway is 5,000 IDs."""
    sizer = BlockSizer(initial=1_000, minimum=1, maximum=10_000_000, runway=5.0, **kwargs)
    sizer.observe(1_000, 1.0)
    return sizer


def test_each_capacity_refusal_doubles_the_runway_never_past_max_runway():
    """A block request that met refusals asks for blocks lasting twice as
    long per refusal; max_runway bounds it however many refusals come."""
    sizer = steady_sizer(max_runway=40.0)
    assert sizer.next_size() == 5_000
    sizer.contended(1)
    assert sizer.next_size() == 10_000
    sizer.contended(2)
    assert sizer.current_runway == 40.0
    assert sizer.next_size() == 40_000
    sizer.contended(5)
    sizer.contended(10_000)  # a huge count neither overflows nor passes the bound
    assert sizer.current_runway == 40.0
    assert sizer.next_size() == 40_000


def test_a_request_without_refusals_changes_nothing_and_the_runway_does_not_shrink_back():
    """The runway stays long through blocks that met no refusal: the fleet
    that was too big for the counter still is."""
    sizer = steady_sizer(max_runway=300.0)
    sizer.contended(0)
    assert sizer.next_size() == 5_000
    sizer.contended(2)
    sizer.next_size()
    for _ in range(50):
        sizer.observe(sizer.last, sizer.last / 1_000)  # still 1,000 IDs/s
        sizer.contended(0)
        assert sizer.next_size() == 20_000


def test_without_max_runway_the_sizer_keeps_its_runway():
    sizer = steady_sizer()
    sizer.contended(3)
    assert sizer.next_size() == 5_000


@pytest.mark.parametrize("max_runway", [4.9, 0.0, -1.0, float("nan")])
def test_max_runway_shorter_than_runway_is_refused(max_runway):
    with pytest.raises(ValueError, match="max_runway"):
        Sequence(MemoryBackend(), "orders", runway=5.0, max_runway=max_runway)
    with pytest.raises(ValueError, match="max_runway"):
        BlockSizer(initial=1, minimum=1, maximum=10, runway=5.0, max_runway=max_runway)


def test_max_runway_defaults_to_five_minutes_or_the_runway_if_longer():
    with Sequence(MemoryBackend(), "orders") as default:
        assert default.sizer.max_runway == MAX_RUNWAY == 300.0
    with Sequence(MemoryBackend(), "orders", runway=600.0) as long:
        assert long.sizer.max_runway == 600.0
    with Sequence(MemoryBackend(), "orders", runway=5.0, max_runway=5.0) as fixed:
        assert fixed.sizer.max_runway == 5.0


# -- a Sequence over a hot counter -----------------------------------------------------


def settled_sequence(backend, clock):
    """A Sequence drawing 10,000 IDs/s on its own clock, run until its
    blocks are the runway's 50,000."""
    seq = Sequence(backend, "orders", prefetch=False, runway=5.0, clock=lambda: clock[0])
    draw(seq, clock, 200_000)
    assert len(backend.blocks[-1]) == pytest.approx(50_000, rel=0.01)
    return seq


def draw(seq, clock, count):
    for _ in range(count):
        seq.next_id()
        clock[0] += 1e-4


def test_a_sequence_asks_for_bigger_blocks_after_a_block_request_was_throttled():
    """One block request answered after a capacity refusal (the backend
    retried a 503): every block after it lasts twice as long."""
    clock = [0.0]
    backend = MemoryBackend()
    seq = settled_sequence(backend, clock)
    before = len(backend.blocks)
    backend.fail_next(1, THROTTLED)
    draw(seq, clock, 400_000)
    later = [len(block) for block in backend.blocks[before + 1 :]]
    assert later, "no block was asked for after the throttled one"
    assert all(size == pytest.approx(100_000, rel=0.01) for size in later), later
    assert seq.sizer.current_runway == 10.0
    seq.close()


def test_a_block_request_that_failed_for_capacity_lengthens_the_runway_too():
    """The request failed outright (ServiceUnavailable after two refusals);
    the caller tries again and the blocks that follow last four times as
    long."""
    clock = [0.0]
    backend = MemoryBackend()
    seq = settled_sequence(backend, clock)
    before = len(backend.blocks)
    backend.fail_next(2, UNAVAILABLE)
    refused = []  # capacity_refusals of each failure the caller saw
    for _ in range(300_000):
        try:
            seq.next_id()
        except ServiceUnavailable as exc:
            refused.append(exc.capacity_refusals)
            continue
        clock[0] += 1e-4
    assert refused == [1, 1]
    later = [len(block) for block in backend.blocks[before + 1 :]]
    assert later, "no block was asked for after the refusals"
    assert all(size == pytest.approx(200_000, rel=0.01) for size in later), later
    seq.close()


def test_a_lost_response_is_no_capacity_refusal():
    """A response lost on the way back says nothing about the counter's
    load: the runway stays as it was."""
    clock = [0.0]
    backend = MemoryBackend()
    seq = settled_sequence(backend, clock)
    backend.fail_next(1, LOST_RESPONSE)
    with pytest.raises(ServiceUnavailable) as raised:
        draw(seq, clock, 100_000)
    assert raised.value.capacity_refusals == 0
    draw(seq, clock, 100_000)
    assert seq.sizer.current_runway == 5.0
    seq.close()


def test_memory_backend_counts_its_capacity_faults():
    backend = MemoryBackend()
    backend.fail_next(1, UNAVAILABLE)
    backend.fail_next(1, THROTTLED)
    with pytest.raises(ServiceUnavailable) as raised:
        backend.allocate("orders", 10, idempotency_key="a")
    assert raised.value.capacity_refusals == 1
    throttled = backend.allocate("orders", 10, idempotency_key="a")
    assert (throttled, throttled.capacity_refusals) == (Block(1, 10), 1)
    assert backend.allocate("orders", 10, idempotency_key="b").capacity_refusals == 0


# -- HttpBackend and FailoverBackend ------------------------------------------------------


def test_http_backend_marks_a_block_that_needed_capacity_retries():
    """A 503 service_unavailable and a 429, then the block: it says two
    refusals, and is still equal to the same block without them."""
    replies = [error(503, "service_unavailable"), error(429, "throttled"), BLOCK]
    with StubServer(replies) as stub:
        block = HttpBackend(stub.url, retry=no_sleep_policy()).allocate("orders", 100)
    assert block == Block(101, 200)
    assert block.capacity_refusals == 2
    assert len(stub.requests) == 3


def test_http_backend_does_not_count_an_outage_as_capacity():
    """502/504 and an API Gateway 503 without the service's code are
    outages, not load: nothing is counted."""
    replies = [error(502, "bad_gateway"), error(504, "timeout"), (503, {}, {"message": "down"}), BLOCK]
    with StubServer(replies) as stub:
        block = HttpBackend(stub.url, retry=no_sleep_policy()).allocate("orders", 100)
    assert block.capacity_refusals == 0


def test_http_backend_says_how_often_a_failed_request_was_refused_for_capacity():
    replies = [error(503, "service_unavailable")] * 10
    with StubServer(replies) as stub, pytest.raises(ServiceUnavailable) as raised:
        HttpBackend(stub.url, retry=no_sleep_policy(attempts=4)).allocate("orders", 100)
    assert raised.value.capacity_refusals == 4


def test_a_sequence_over_http_lengthens_its_runway_after_throttled_retries():
    replies = [error(503, "service_unavailable"), BLOCK]
    with StubServer(replies) as stub:
        backend = HttpBackend(stub.url, retry=no_sleep_policy())
        with Sequence(backend, "orders", prefetch=False, initial_block=100) as seq:
            assert seq.next_id() == 101
            assert seq.sizer.current_runway == 10.0


def test_failover_passes_on_the_refusals_of_every_region_it_tried():
    """Region a is refused for capacity, b answers: the block says a's
    refusal, so the Sequence still learns the counters are hot. When every
    region fails, the failure adds them all up."""
    a, b = MemoryBackend(step=2), MemoryBackend(start=2, step=2)
    a.fail_next(1, UNAVAILABLE)
    b.fail_next(1, THROTTLED)
    failover = FailoverBackend([a, b])
    block = failover.allocate("orders", 10, idempotency_key="k")
    assert block == Block(2, 20, 2)
    assert block.capacity_refusals == 2
    a.fail_next(1, UNAVAILABLE)
    b.fail_next(1, UNAVAILABLE)
    with pytest.raises(ServiceUnavailable) as raised:
        failover.allocate("orders", 10, idempotency_key="k2")
    assert raised.value.capacity_refusals == 2


def test_a_region_answering_after_capacity_refusals_is_not_failed_over():
    """Refusals inside a request the region answered are load, not an
    outage: the block comes from that region and the current one stays."""
    a, b = MemoryBackend(step=2), MemoryBackend(start=2, step=2)
    a.fail_next(1, THROTTLED)
    failover = FailoverBackend([a, b])
    block = failover.allocate("orders", 10, idempotency_key="k")
    assert (block, block.capacity_refusals) == (Block(1, 19, 2), 1)
    assert failover.failovers == 0
    assert failover.current is a
    assert b.calls == 0
