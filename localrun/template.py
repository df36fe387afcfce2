"""Reads template.yaml for everything that runs the functions outside AWS: the
dev server and the tests. Tables, environment variables and handlers all come
from the template itself, so a local run cannot drift from what is deployed.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from samcli.yamlhelper import yaml_parse

ROOT = Path(__file__).resolve().parent.parent
# What leaves a property (or a list's entry) out where a condition says so.
NO_VALUE = {"Ref": "AWS::NoValue"}
TEMPLATE = ROOT / "template.yaml"

# Where a local run (the dev server, the in-process tests, the benchmarks)
# departs from a deployment's default, unless told otherwise: next/batch
# create the counters they are asked for, so trying it out needs no admin
# call first. A deployment creates its counters through the admin API.
LOCAL_DEFAULTS = {"AutoCreateCounters": "true"}


@dataclass(frozen=True)
class FunctionSpec:
    logical_id: str
    code_dir: Path
    module: str  # "app"
    handler: str  # "lambda_handler"
    layer_dirs: tuple[Path, ...]
    timeout_seconds: float = 3.0  # Lambda's default when the template sets none


@dataclass(frozen=True)
class RouteAuth:
    """How API Gateway authenticates one route: SigV4 (an AWS_IAM
    authorizer) and/or an API key (ApiKeyRequired)."""

    sigv4: bool
    api_key: bool


class Template:
    def __init__(self, path: Path = TEMPLATE, parameter_overrides: dict[str, str] | None = None) -> None:
        self.path = path
        self.raw: dict[str, Any] = yaml_parse(path.read_text())
        self.resources: dict[str, Any] = self.raw["Resources"]
        self.parameters = {
            name: str(spec.get("Default", "")) for name, spec in self.raw.get("Parameters", {}).items()
        }
        unknown = set(parameter_overrides or {}) - set(self.parameters)
        if unknown:
            raise ValueError(f"template.yaml has no parameter(s) {sorted(unknown)}")
        for name, value in (parameter_overrides or {}).items():
            allowed = [str(choice) for choice in self.raw["Parameters"][name].get("AllowedValues", [value])]
            if value not in allowed:
                raise ValueError(f"template.yaml's {name} takes {', '.join(allowed)}, not {value!r}")
        self.parameters.update(parameter_overrides or {})
        # What the functions run with locally: LOCAL_DEFAULTS, save where overridden.
        self.local_parameters = self.parameters | {
            name: value for name, value in LOCAL_DEFAULTS.items() if name not in (parameter_overrides or {})
        }

    def of_type(self, resource_type: str) -> dict[str, Any]:
        return {k: v for k, v in self.resources.items() if v["Type"] == resource_type}

    @property
    def tables(self) -> dict[str, dict[str, Any]]:
        return self.of_type("AWS::DynamoDB::Table")

    def create_table_kwargs(self, logical_id: str, table_name: str) -> dict[str, Any]:
        """CreateTable arguments for a table, from the template's own definition."""
        props = self.tables[logical_id]["Properties"]
        return {
            "TableName": table_name,
            "KeySchema": props["KeySchema"],
            "AttributeDefinitions": props["AttributeDefinitions"],
            "BillingMode": props.get("BillingMode", "PAY_PER_REQUEST"),
        }

    def ttl_attribute(self, logical_id: str) -> str | None:
        spec = self.tables[logical_id]["Properties"].get("TimeToLiveSpecification")
        return spec["AttributeName"] if spec and spec.get("Enabled") else None

    @property
    def functions(self) -> dict[str, FunctionSpec]:
        specs = {}
        globals_ = self.raw.get("Globals", {}).get("Function", {})
        for logical_id, resource in self.of_type("AWS::Serverless::Function").items():
            props = resource["Properties"]
            module, handler = props["Handler"].rsplit(".", 1)
            # Only the stack's own layers run locally: a layer given by ARN
            # (the OpenTelemetry one) is AWS's, and left out when not chosen.
            # SAM puts Globals' layers before the function's own.
            layers = [
                layer
                for layer in map(self._taken, [*globals_.get("Layers", []), *props.get("Layers", [])])
                if isinstance(layer, dict) and layer.get("Ref") in self.resources
            ]
            timeout = props.get("Timeout", globals_.get("Timeout", 3))
            specs[logical_id] = FunctionSpec(
                logical_id=logical_id,
                code_dir=ROOT / props["CodeUri"],
                module=module,
                handler=handler,
                layer_dirs=tuple(
                    ROOT / self.resources[ref["Ref"]]["Properties"]["ContentUri"] for ref in layers
                ),
                timeout_seconds=float(self._resolve(timeout, {})),
            )
        return specs

    def route_auth(self) -> dict[tuple[str, str], RouteAuth]:
        """Each API route's authentication, by (METHOD, path), as the
        template's Api events say for the parameters' values: the event's
        Authorizer, else its API's DefaultAuthorizer; its ApiKeyRequired."""
        apis = self.of_type("AWS::Serverless::Api")
        found = {}
        for resource in self.of_type("AWS::Serverless::Function").values():
            for event in resource["Properties"].get("Events", {}).values():
                if event["Type"] != "Api":
                    continue
                props = event["Properties"]
                api = apis[props["RestApiId"]["Ref"]]["Properties"].get("Auth", {})
                auth = props.get("Auth", {})
                authorizer = auth.get("Authorizer", api.get("DefaultAuthorizer", "NONE"))
                api_key = self._taken(auth.get("ApiKeyRequired", api.get("ApiKeyRequired", False)))
                found[props["Method"].upper(), props["Path"]] = RouteAuth(
                    sigv4=self._resolve(authorizer, {}) == "AWS_IAM",
                    api_key=api_key != NO_VALUE and self._resolve(api_key, {}) == "true",
                )
        return found

    def _taken(self, value: Any) -> Any:
        """``value`` with each Fn::If replaced by the branch its condition takes."""
        while isinstance(value, dict) and set(value) == {"Fn::If"}:
            condition, if_true, if_false = value["Fn::If"]
            value = if_true if self.condition(condition) else if_false
        return value

    def environment(self, logical_id: str, physical_names: dict[str, str]) -> dict[str, str]:
        """A function's environment variables as a local run gives them:
        Globals merged with its own, Refs resolved to parameter values (with
        LOCAL_DEFAULTS) or to ``physical_names`` of resources."""
        globals_ = self.raw.get("Globals", {}).get("Function", {})
        variables = dict(globals_.get("Environment", {}).get("Variables", {}))
        own = self.resources[logical_id]["Properties"].get("Environment", {}).get("Variables", {})
        variables.update(own)
        found = {}
        for key, value in variables.items():
            taken = self._taken(value)
            if taken != NO_VALUE:
                found[key] = self._resolve(taken, physical_names, local=True)
        return found

    def _resolve(self, value: Any, physical_names: dict[str, str], *, local: bool = False) -> str:
        """A value as CloudFormation would give it: literals, Refs to
        parameters (their defaults, or the overrides; ``local``: with
        LOCAL_DEFAULTS) and to resources (``physical_names``), and Fn::If on
        the template's Conditions."""
        value = self._taken(value)
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, str | int | float):
            return str(value)
        if isinstance(value, dict) and set(value) == {"Ref"}:
            ref = value["Ref"]
            parameters = self.local_parameters if local else self.parameters
            if ref in parameters:
                return parameters[ref]
            if ref in physical_names:
                return physical_names[ref]
        raise ValueError(f"cannot resolve {value!r} outside AWS; give it a local value")

    def condition(self, name: str) -> bool:
        """The value of one of the template's Conditions with its parameters'
        values (defaults, or the overrides)."""
        conditions = self.raw.get("Conditions", {})
        if name not in conditions:
            raise ValueError(f"template.yaml has no condition {name!r}")
        return self._holds(conditions[name])

    def holds(self, expression: Any) -> bool:
        """A condition expression written in place (a rule's RuleCondition)
        with the parameters' values."""
        return self._holds(expression)

    def _holds(self, expression: Any) -> bool:
        if isinstance(expression, dict) and len(expression) == 1:
            ((function, arguments),) = expression.items()
            if function == "Condition":
                return self.condition(arguments)
            if function == "Fn::Equals":
                left, right = (self._resolve(argument, {}) for argument in arguments)
                return left == right
            if function == "Fn::Not":
                (inner,) = arguments
                return not self._holds(inner)
            if function == "Fn::And":
                return all(self._holds(inner) for inner in arguments)
            if function == "Fn::Or":
                return any(self._holds(inner) for inner in arguments)
        raise ValueError(f"cannot evaluate the condition {expression!r} outside AWS")


@functools.cache
def default_template() -> Template:
    return Template()
