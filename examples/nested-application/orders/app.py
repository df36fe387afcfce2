"""The orders function of the nested-application example: one Sequence per
execution environment, built outside the handler, handing out order numbers
from memory in blocks taken from the nested idblocks API (SigV4, the
function's own role)."""

import os
from typing import Any

from idblocks import HttpBackend, IamAuth, Sequence

orders = Sequence(HttpBackend(os.environ["IDBLOCKS_URL"], auth=IamAuth()), "orders")


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return {"order_id": orders.next_id()}
