"""Runs a function's real handler in this process, the way the Lambda runtime
would: its layers on sys.path, its module imported once, its environment in
place, and a context object that counts down to the function's timeout.

Only the standard library is imported at module level: the benchmarks' child
processes import LocalContext with nothing but the layer on their path."""

from __future__ import annotations

import importlib.util
import os
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from localrun.template import FunctionSpec, Template

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


class LocalContext:
    """The parts of Lambda's context object that Powertools reads."""

    def __init__(self, function_name: str, timeout_seconds: float, memory_mb: int = 512) -> None:
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = memory_mb
        self.invoked_function_arn = f"arn:aws:lambda:us-east-1:123456789012:function:{function_name}"
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = "local"
        self._deadline = time.monotonic() + timeout_seconds

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def function_environment(
    template: Template,
    table_names: Mapping[str, str],
    dynamodb_endpoint: str,
    credentials: Mapping[str, str],
) -> dict[str, str]:
    """The functions' environment as template.yaml sets it (all three share
    Globals), pointed at ``dynamodb_endpoint``, with ``credentials`` for it."""
    return (
        template.environment("NextFunction", dict(table_names))
        | dict(credentials)
        | {"AWS_ENDPOINT_URL_DYNAMODB": dynamodb_endpoint}
    )


def install_environment(environment: Mapping[str, str]) -> None:
    """Make ``environment`` this process's own, before any handler is loaded.

    The one place a local run writes os.environ, and it must: the handlers run
    in this process, and Powertools reads its POWERTOOLS_* variables when its
    modules are imported, botocore its AWS_* ones when a client is made; as in
    a Lambda container, the environment is there before the code."""
    os.environ.update(environment)


_modules: dict[str, ModuleType] = {}


def load_handler(spec: FunctionSpec) -> Handler:
    """Import ``spec``'s handler module (once) and return its handler."""
    return getattr(load_module(spec), spec.handler)


def load_module(spec: FunctionSpec) -> ModuleType:
    """Import ``spec``'s handler module, once. Every function's module is
    named ``app``, so each gets a name of its own here."""
    module = _modules.get(spec.logical_id)
    if module is None:
        for layer in spec.layer_dirs:
            if str(layer) not in sys.path:
                sys.path.insert(0, str(layer))
        path = spec.code_dir / f"{spec.module}.py"
        name = f"_idblocks_fn_{spec.logical_id}"
        module_spec = importlib.util.spec_from_file_location(name, path)
        if module_spec is None or module_spec.loader is None:
            raise ImportError(f"cannot load {path}")
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
        _modules[spec.logical_id] = module
    return module
