"""Print the OpenAPI document of the whole API, merged by Powertools from the
three functions' resolvers (the routes, parameters and models in the code).

    python -m scripts.openapi > docs/openapi.json     (make openapi)
"""

from __future__ import annotations

import json
import os
import re

from aws_lambda_powertools.event_handler.openapi.merge import OpenAPIMerge

from devserver.template import default_template

DESCRIPTION = """\
Unique, increasing IDs from DynamoDB counters. `next` hands out one ID; `batch`
hands out a block [start, end] for the client to use locally. IDs of a counter
are never handed out twice, including after the counter is deleted and created
again. Send `Idempotency-Key` to make next and batch safe to retry.

next and batch authenticate as the deployment's ClientAuth parameter says
(SigV4, API key or none); the admin routes always need SigV4 (AWS_IAM)."""


def document() -> dict:
    from aws_lambda_powertools.event_handler.openapi.models import APIKey, APIKeyIn

    from devserver.runtime import load_module

    schemes = {
        "sigv4": APIKey(
            name="Authorization", in_=APIKeyIn.header, description="AWS Signature Version 4 (AWS_IAM)"
        ),
        "api_key": APIKey(name="x-api-key", in_=APIKeyIn.header, description="API key (ClientAuth API_KEY)"),
    }
    merge = OpenAPIMerge(
        title="idblocks",
        version="1.0.0",
        description=DESCRIPTION,
        security_schemes=schemes,
        on_conflict="error",
    )
    functions = default_template().functions
    for logical_id in sorted(functions):
        app = load_module(functions[logical_id]).app
        merge.add_schema(app.get_openapi_schema(title="idblocks", security_schemes=schemes))
    doc = tidy(json.loads(merge.get_openapi_json_schema()))
    # The dev server sets the functions' environment from its template
    # parameters before it builds this document; GET next is off under AllowGetNext=false.
    if os.environ.get("ALLOW_GET_NEXT", "true") == "false":
        del doc["paths"]["/counters/{name}/next"]["get"]
    return doc


def tidy(doc: dict) -> dict:
    """Say only what the API does. Powertools documents a 422 with its own
    validation-error body on every validated route; this API answers bad
    input with 400 and its own error body instead (idblocks_core.http). A 204
    has no body. Schemas nothing refers to any more are dropped."""
    for operations in doc["paths"].values():
        for operation in operations.values():
            responses = operation["responses"]
            if "HTTPValidationError" in json.dumps(responses.get("422", {})):
                del responses["422"]
            if "204" in responses:
                responses["204"].pop("content", None)
    schemas = doc["components"]["schemas"]
    used: set[str] = set()
    pending = [json.dumps(doc["paths"])]
    while pending:
        for name in re.findall(r"#/components/schemas/(\w+)", pending.pop()):
            if name not in used:
                used.add(name)
                pending.append(json.dumps(schemas[name]))
    doc["components"]["schemas"] = {name: schemas[name] for name in sorted(used)}
    return doc


def main() -> None:
    print(json.dumps(document(), indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
