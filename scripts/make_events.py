"""Write events/*.json: one API Gateway (REST, proxy) event per route.

Each starts as `sam local generate-event apigateway aws-proxy` output and is
then given the route's real path parameters, body and an IAM caller, so the
same files serve `sam local invoke -e` and the tests.

    python -m scripts.make_events
"""

from __future__ import annotations

import json
import subprocess

from localrun.template import ROOT

STAGE = "v1"
CALLER = {
    "accountId": "123456789012",
    "caller": "AIDAEXAMPLECALLER0001",
    "accessKey": "AKIAEXAMPLEACCESSKEY",
    "userArn": "arn:aws:iam::123456789012:user/alice",
    "user": "AIDAEXAMPLECALLER0001",
}

# file name: (method, resource, path parameters, query, body)
ROUTES: dict[str, tuple[str, str, dict[str, str] | None, dict[str, str] | None, object]] = {
    "next-post": ("POST", "/counters/{name}/next", {"name": "orders"}, None, None),
    "next-get": ("GET", "/counters/{name}/next", {"name": "orders"}, None, None),
    "batch": ("POST", "/counters/{name}/batch", {"name": "orders"}, None, {"count": 100}),
    "admin-create": ("POST", "/admin/counters", None, None, {"name": "invoices", "start": 1000}),
    "admin-list": ("GET", "/admin/counters", None, {"limit": "10"}, None),
    "admin-get": ("GET", "/admin/counters/{name}", {"name": "invoices"}, None, None),
    "admin-set": ("PUT", "/admin/counters/{name}", {"name": "invoices"}, None, {"next": 5000}),
    "admin-delete": ("DELETE", "/admin/counters/{name}", {"name": "invoices"}, None, None),
}


def generate(method: str, resource: str, params: dict[str, str] | None) -> dict:
    path = resource
    for key, value in (params or {}).items():
        path = path.replace("{" + key + "}", value)
    out = subprocess.run(
        [
            "sam", "local", "generate-event", "apigateway", "aws-proxy",
            "--method", method, "--resource", resource, "--path", path.lstrip("/"), "--stage", STAGE,
        ],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return json.loads(out.stdout)


def shape(event: dict, params: dict[str, str] | None, query: dict[str, str] | None, body: object) -> dict:
    event["pathParameters"] = params
    event["queryStringParameters"] = query
    event["multiValueQueryStringParameters"] = {k: [v] for k, v in query.items()} if query else None
    event["stageVariables"] = None
    event["isBase64Encoded"] = False
    event["body"] = json.dumps(body) if body is not None else None
    headers = {
        "Accept": "application/json",
        "Host": event["headers"]["Host"],
        "User-Agent": "idblocks-example",
    }
    if body is not None:
        headers["Content-Type"] = "application/json"
    event["headers"] = headers
    event["multiValueHeaders"] = {k: [v] for k, v in headers.items()}
    event["requestContext"]["identity"].update(CALLER)
    return event


def main() -> None:
    for name, (method, resource, params, query, body) in ROUTES.items():
        event = shape(generate(method, resource, params), params, query, body)
        (ROOT / "events" / f"{name}.json").write_text(json.dumps(event, indent=2) + "\n")


if __name__ == "__main__":
    main()
