"""The Node client (client-node/) against the dev server, lost answers
included: the Node tests in client-node/test/devserver run with the URLs of
a dev server and of a proxy in front of it that loses responses."""

from __future__ import annotations

from tests.support.node import NODE_DIR, needs_node_client, run_node_tests
from tests.support.proxy import LossyProxy

TESTS = NODE_DIR / "dist" / "test" / "devserver" / "service.test.js"

pytestmark = needs_node_client(TESTS)


def test_the_node_client_over_http_with_lost_answers(dev):
    with LossyProxy(dev.url) as proxy:
        # The first three block requests through the proxy are applied, then their answers lost.
        proxy.lose = 3
        run_node_tests(TESTS, {"IDBLOCKS_URL": dev.url, "IDBLOCKS_LOSSY_URL": proxy.url}, passed=8)
    assert proxy.lost == [("POST", "/counters/node-lossy/batch", 200)] * 3
    # Each lost answer was asked again with its key: 200 IDs drawn in blocks of 20, no block burned.
    assert dev.get("/admin/counters/node-lossy").json()["next"] <= 200 + 20 + 1
