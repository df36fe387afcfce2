"""template.yaml as CloudFormation will see it: AWS::LanguageExtensions
resolved with given parameter values (SAM CLI's own implementation), then the
SAM transform (samtranslator, the library CloudFormation's transform runs)."""

from __future__ import annotations

import copy
import functools
import os
from typing import Any

from samcli.lib.cfn_language_extensions.api import process_template
from samtranslator.translator.transform import transform

from localrun.template import default_template


class _NoManagedPolicies:
    """The template names no managed policies; never ask IAM for them."""

    def load(self) -> dict[str, str]:
        return {}


def _translate(overrides: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    template = default_template()
    parameters = template.parameters | dict(overrides)
    expanded = process_template(copy.deepcopy(template.raw), parameter_values=parameters)
    expanded["Transform"] = "AWS::Serverless-2016-10-31"
    for resource in expanded["Resources"].values():
        props = resource.get("Properties", {})
        for key in ("CodeUri", "ContentUri"):  # as `sam package` would have uploaded them
            if key in props:
                props[key] = "s3://bucket/key"
    previous = os.environ.get("AWS_DEFAULT_REGION")
    os.environ["AWS_DEFAULT_REGION"] = "us-east-1"
    try:
        return transform(expanded, parameters, _NoManagedPolicies())
    finally:
        if previous is None:
            del os.environ["AWS_DEFAULT_REGION"]
        else:
            os.environ["AWS_DEFAULT_REGION"] = previous


@functools.cache
def translate(**overrides: str) -> dict[str, Any]:
    return _translate(tuple(sorted(overrides.items())))


def method_security(cfn: dict[str, Any]) -> dict[tuple[str, str], list[dict[str, list]]]:
    """(METHOD, path) -> the OpenAPI security requirement API Gateway enforces."""
    body = cfn["Resources"]["Api"]["Properties"]["Body"]
    return {
        (method.upper(), path): operation.get("security", [])
        for path, operations in body["paths"].items()
        for method, operation in operations.items()
    }
