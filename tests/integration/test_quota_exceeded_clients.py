"""A client key's spent daily quota (QUOTA_EXCEEDED, as the transformed
template answers it) does not set either client retrying in a loop: both
retry every 429 alike, by its status (throttled included), within a deadline
of 30 s by default; the answer's Retry-After is past that deadline, so a
block request ends at its first answer, and either client's Sequence then
sends nothing until the pause is over. A throttled answer (no Retry-After)
is retried, as it should be: the same stub with it shows the difference."""

from __future__ import annotations

import json
import os

import pytest

from idblocks import HttpBackend, Sequence, ServiceUnavailable
from localrun.environment import scrubbed_environment
from tests.support.gateway import gateway_responses, replayed
from tests.support.node import INDEX, needs_node_client, run_module
from tests.support.sam import translate
from tests.support.stub_http import StubServer


def answer(kind: str) -> tuple[int, dict[str, str], dict]:
    responses = gateway_responses(translate(ClientAuth="API_KEY", UsageQuotaPerDay="1000"))
    return replayed(kind, responses[kind])


def test_the_python_client_asks_once_when_the_quota_is_spent():
    quota = answer("QUOTA_EXCEEDED")
    with StubServer([quota] * 20) as stub:
        with pytest.raises(ServiceUnavailable, match=r"quota_exceeded.*asked to retry after 600 s"):
            HttpBackend(stub.url).allocate("orders", 10)
        assert len(stub.requests) == 1
        ids = Sequence(HttpBackend(stub.url), "orders", block_size=10, prefetch=False)
        for _ in range(3):  # the first call asks once; the Retry-After then holds the others
            with pytest.raises(ServiceUnavailable, match="quota_exceeded"):
                ids.next_id()
        assert len(stub.requests) == 2
        # close() asks again for a request it counts as unanswered, up to
        # CLOSE_ATTEMPTS times while its timeout lasts: none with none
        ids.close(timeout=0)
        assert len(stub.requests) == 2


def test_a_throttled_answer_is_retried_by_the_python_client():
    throttled = answer("THROTTLED")
    block = (200, {}, {"counter": "orders", "start": 1, "end": 10, "count": 10, "step": 1})
    with StubServer([throttled, throttled, block]) as stub:
        assert HttpBackend(stub.url).allocate("orders", 10).start == 1
    assert len(stub.requests) == 3


NODE_SCRIPT = """
const { HttpBackend, Sequence } = await import(process.argv[1]);
const url = process.argv[2];
const seen = [];
try {
  await new HttpBackend(url).allocate("orders", 10);
} catch (error) {
  seen.push({ name: error.name, retryAfter: error.retryAfter, message: error.message });
}
const ids = new Sequence(new HttpBackend(url), "orders", { blockSize: 10, waitTimeout: 1, prefetch: false });
for (let call = 0; call < 3; call++) {
  try {
    await ids.next();
  } catch (error) {
    seen.push({ name: error.name, retryAfter: error.retryAfter, message: error.message });
  }
}
// close() asks again for a request it counts as unanswered (up to
// CLOSE_ATTEMPTS times while its timeout lasts): none with none
await ids.close(0);
console.log(JSON.stringify(seen));
"""


@needs_node_client()
def test_the_node_client_asks_once_and_then_waits_out_the_pause():
    quota = answer("QUOTA_EXCEEDED")
    with StubServer([quota] * 20) as stub:
        done = run_module(
            NODE_SCRIPT,
            INDEX.as_uri(),
            stub.url,
            env=scrubbed_environment() | {"PATH": os.environ["PATH"]},
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-4000:]
        seen = json.loads(done.stdout.strip().splitlines()[-1])
        # one request from the backend, one from the Sequence's first next();
        # the two calls after it wait out the pause instead of asking again
        assert len(stub.requests) == 2, seen
    assert [s["name"] for s in seen] == ["ServiceUnavailable"] * 4
    assert "quota_exceeded" in seen[0]["message"]
    assert seen[0]["retryAfter"] == 600
    assert all("asked for no request" in s["message"] for s in seen[2:]), seen
