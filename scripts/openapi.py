"""Print the OpenAPI document of the whole API, merged by Powertools from the
three functions' resolvers (the routes, parameters and models in the code).

    python -m scripts.openapi > docs/openapi.json     (make openapi)
"""

from __future__ import annotations

import json
import re
import sys
import warnings

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
    template = default_template()
    for layer in {d for spec in template.functions.values() for d in spec.layer_dirs}:
        sys.path.insert(0, str(layer))
    from idblocks_core.http import SECURITY_SCHEMES  # from the layer, now on the path

    merge = OpenAPIMerge(
        title="idblocks",
        version="1.0.0",
        description=DESCRIPTION,
        security_schemes=SECURITY_SCHEMES,
        on_conflict="error",
    )
    for spec in sorted(template.functions.values(), key=lambda s: s.logical_id):
        merge.add_file(spec.code_dir / f"{spec.module}.py")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        doc = json.loads(merge.get_openapi_json_schema())
    # OpenAPIMerge only warns when a handler fails to load; its routes must not silently go missing
    failures = [str(w.message) for w in caught if "resolver" in str(w.message)]
    if failures:
        raise RuntimeError("; ".join(failures))
    return tidy(doc)


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
