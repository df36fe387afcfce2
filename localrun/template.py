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
TEMPLATE = ROOT / "template.yaml"


@dataclass(frozen=True)
class FunctionSpec:
    logical_id: str
    code_dir: Path
    module: str  # "app"
    handler: str  # "lambda_handler"
    layer_dirs: tuple[Path, ...]
    timeout_seconds: float = 3.0  # Lambda's default when the template sets none


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
        self.parameters.update(parameter_overrides or {})

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
            layers = props.get("Layers", globals_.get("Layers", []))
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

    def environment(self, logical_id: str, physical_names: dict[str, str]) -> dict[str, str]:
        """A function's environment variables: Globals merged with its own,
        Refs resolved to parameter values or to ``physical_names`` of resources."""
        globals_ = self.raw.get("Globals", {}).get("Function", {})
        variables = dict(globals_.get("Environment", {}).get("Variables", {}))
        own = self.resources[logical_id]["Properties"].get("Environment", {}).get("Variables", {})
        variables.update(own)
        return {key: self._resolve(value, physical_names) for key, value in variables.items()}

    def _resolve(self, value: Any, physical_names: dict[str, str]) -> str:
        if isinstance(value, str | int | float):
            return str(value)
        if isinstance(value, dict) and set(value) == {"Ref"}:
            ref = value["Ref"]
            if ref in self.parameters:
                return self.parameters[ref]
            if ref in physical_names:
                return physical_names[ref]
        raise ValueError(f"cannot resolve {value!r} outside AWS; give it a local value")


@functools.cache
def default_template() -> Template:
    return Template()
