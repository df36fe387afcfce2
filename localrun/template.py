"""Reads template.yaml for everything that runs the functions outside AWS (the
dev server, the benchmarks), for the tests and for `make sar`: tables,
environment variables, handlers and routes all come from the template itself,
so a local run cannot drift from what is deployed.

One reading serves them all (resolve): the template as CloudFormation's
AWS::LanguageExtensions transform leaves it for the SAM transform, made by SAM
CLI's own implementation of that transform, with the parameters' values and
the pseudo parameters of a stack (STACK, or another Stack): every Fn::If,
condition and Ref to a parameter or pseudo parameter decided, every reference
to a resource left for CloudFormation.
"""

from __future__ import annotations

import copy
import functools
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from samcli.lib.cfn_language_extensions.api import (
    IntrinsicResolverProcessor,
    create_default_intrinsic_resolver,
)
from samcli.lib.cfn_language_extensions.models import (
    PseudoParameterValues,
    ResolutionMode,
    TemplateProcessingContext,
)
from samcli.lib.cfn_language_extensions.pipeline import ProcessingPipeline
from samcli.lib.cfn_language_extensions.processors import (
    DeletionPolicyProcessor,
    ForEachProcessor,
    TemplateParsingProcessor,
    UpdateReplacePolicyProcessor,
)
from samcli.lib.cfn_language_extensions.resolvers import FnSubResolver, IntrinsicResolver
from samcli.lib.cfn_language_extensions.resolvers.fn_sub import PLACEHOLDER_PATTERN
from samcli.lib.cfn_language_extensions.utils import derive_partition, derive_url_suffix
from samcli.yamlhelper import yaml_parse

from localrun.names import did_you_mean

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
class Stack:
    """The pseudo parameters a template is read with: the stack's name, its
    region and account (AWS::Partition and AWS::URLSuffix follow the region)."""

    name: str = "idblocks"
    region: str = "us-east-1"
    account_id: str = "123456789012"

    @property
    def values(self) -> dict[str, str]:
        """Each pseudo parameter's value, by its name (AWS::Region ...)."""
        return {
            "AWS::StackName": self.name,
            "AWS::StackId": f"arn:{derive_partition(self.region)}:cloudformation:{self.region}:"
            f"{self.account_id}:stack/{self.name}/00000000-0000-0000-0000-000000000000",
            "AWS::Region": self.region,
            "AWS::AccountId": self.account_id,
            "AWS::Partition": derive_partition(self.region),
            "AWS::URLSuffix": derive_url_suffix(self.region),
        }

    def pseudo_parameters(self) -> PseudoParameterValues:
        values = self.values
        return PseudoParameterValues(
            region=self.region,
            account_id=self.account_id,
            stack_name=self.name,
            stack_id=values["AWS::StackId"],
            partition=values["AWS::Partition"],
            url_suffix=values["AWS::URLSuffix"],
        )


# Outside AWS there is no stack: the template is read as the stack the tests
# describe (idblocks in us-east-1 of account 123456789012).
STACK = Stack()


class _SubKeepingReferences(FnSubResolver):
    """Fn::Sub as CloudFormation's transform leaves it. SAM CLI (1.170)
    substitutes what it knows and returns a bare string even where a
    ${Resource} or ${Resource.Attribute} is left in it, so the Fn::Sub that
    CloudFormation would still resolve is lost (cfn-lint: E1029). Here the
    function stays wherever a variable is left for CloudFormation, with the
    parameters and pseudo parameters substituted."""

    def resolve(self, value: dict[str, Any]) -> Any:
        text, variables = self._parse_args(self.get_function_args(value))
        variables = self._resolve_variable_map(variables)
        left: set[str] = set()

        def substitute(found: re.Match[str]) -> str:
            name = found[1]
            if name.startswith("!"):  # an escaped ${!Literal}: the kept function unescapes it
                return found[0]
            known = self._resolve_variable(name, variables)
            if known is None or isinstance(known, dict):
                left.add(name)
                return found[0]
            return self._value_to_string(known)

        substituted = PLACEHOLDER_PATTERN.sub(substitute, text)
        if not left:
            return super().resolve(value)
        kept = {name: variables[name] for name in sorted(left) if name in variables}
        return {"Fn::Sub": [substituted, kept] if kept else substituted}


def _resolver(context: TemplateProcessingContext) -> IntrinsicResolver:
    """SAM CLI's intrinsic resolvers, in its order, with its Fn::Sub's
    replaced (_SubKeepingReferences)."""
    resolver = IntrinsicResolver(context)
    for each in create_default_intrinsic_resolver(context).resolvers:
        resolver.register_resolver(_SubKeepingReferences if type(each) is FnSubResolver else type(each))
    return resolver


def pipeline(context: TemplateProcessingContext) -> ProcessingPipeline:
    """SAM CLI's default pipeline (samcli.lib.cfn_language_extensions.api.
    create_default_pipeline: tests/infra/test_template_reading.py holds the two
    alike), on _resolver."""
    resolver = _resolver(context)
    return ProcessingPipeline(
        [
            TemplateParsingProcessor(),
            ForEachProcessor(intrinsic_resolver=resolver),
            IntrinsicResolverProcessor(resolver),
            DeletionPolicyProcessor(),
            UpdateReplacePolicyProcessor(),
        ]
    )


@dataclass(frozen=True)
class Resolution:
    """A template as AWS::LanguageExtensions leaves it (``template``), and
    the value of each of its Conditions."""

    template: dict[str, Any]
    conditions: dict[str, bool]
    context: TemplateProcessingContext

    def holds(self, expression: Any) -> bool:
        """A condition expression written in place (a rule's RuleCondition)."""
        value = _resolver(self.context).resolve_value(copy.deepcopy(expression))
        if not isinstance(value, bool):
            raise ValueError(f"cannot evaluate the condition {expression!r} outside AWS")
        return value


def resolve(raw: dict[str, Any], parameters: dict[str, str], stack: Stack = STACK) -> Resolution:
    """``raw`` as CloudFormation's AWS::LanguageExtensions hands it to the SAM
    transform, given every parameter's value and the stack's pseudo
    parameters: SAM CLI's implementation of the transform
    (samcli.lib.cfn_language_extensions), which resolves Resources,
    Conditions and Outputs and leaves Globals as written."""
    context = TemplateProcessingContext(
        fragment=copy.deepcopy(raw),
        parameter_values=dict(parameters),
        pseudo_parameters=stack.pseudo_parameters(),
        resolution_mode=ResolutionMode.PARTIAL,
    )
    template = pipeline(context).process_template(context)
    return Resolution(template, dict(context.resolved_conditions), context)


class _NoManagedPolicies:
    """The template names no managed policies; never ask IAM for them."""

    def load(self) -> dict[str, str]:
        return {}


def sam_transform(
    template: dict[str, Any], parameters: dict[str, str], stack: Stack = STACK
) -> dict[str, Any]:
    """The SAM transform of ``template`` as CloudFormation runs it in
    ``stack``'s region, given the stack's parameter values, with the code and
    layer as `sam package` would have uploaded them."""
    # Imported here: the dev server, which reads this module, never transforms.
    from samtranslator.translator.transform import transform

    # SAM warns after every transform that its own usage metrics went unpublished.
    logging.getLogger("samtranslator.metrics.metrics").setLevel(logging.ERROR)

    template = copy.deepcopy(template)
    for resource in template["Resources"].values():
        props = resource.get("Properties", {})
        for key in ("CodeUri", "ContentUri"):
            if key in props:
                props[key] = "s3://bucket/key"
    previous = os.environ.get("AWS_DEFAULT_REGION")
    os.environ["AWS_DEFAULT_REGION"] = stack.region
    try:
        return dict(transform(template, parameters, _NoManagedPolicies()))
    finally:
        if previous is None:
            del os.environ["AWS_DEFAULT_REGION"]
        else:
            os.environ["AWS_DEFAULT_REGION"] = previous


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


@functools.cache
def _parsed(path: Path, modified: int) -> dict[str, Any]:
    """A template file parsed, once for each time it is written."""
    return dict(yaml_parse(path.read_text()))


class Template:
    def __init__(
        self,
        path: Path = TEMPLATE,
        parameter_overrides: dict[str, str] | None = None,
        stack: Stack = STACK,
    ) -> None:
        self.path = path
        self.stack = stack
        self.raw: dict[str, Any] = copy.deepcopy(_parsed(path, path.stat().st_mtime_ns))
        self.resources: dict[str, Any] = self.raw["Resources"]
        self.parameters = {
            name: str(spec.get("Default", "")) for name, spec in self.raw.get("Parameters", {}).items()
        }
        unknown = set(parameter_overrides or {}) - set(self.parameters)
        if unknown:
            said = ", ".join(f"{name}{did_you_mean(name, self.parameters)}" for name in sorted(unknown))
            raise ValueError(f"template.yaml has no parameter {said}")
        for name, value in (parameter_overrides or {}).items():
            allowed = [str(choice) for choice in self.raw["Parameters"][name].get("AllowedValues", [value])]
            if value not in allowed:
                raise ValueError(f"template.yaml's {name} takes {', '.join(allowed)}, not {value!r}")
        self.parameters.update(parameter_overrides or {})
        # What the functions run with locally: LOCAL_DEFAULTS, save where overridden.
        self.local_parameters = self.parameters | {
            name: value for name, value in LOCAL_DEFAULTS.items() if name not in (parameter_overrides or {})
        }

    @functools.cached_property
    def resolved(self) -> Resolution:
        """The template as the SAM transform receives it in a stack with
        these parameters' values (resolve)."""
        return resolve(self.raw, self.parameters, self.stack)

    @functools.cached_property
    def transformed(self) -> dict[str, Any]:
        """The template as CloudFormation deploys it in that stack: the SAM
        transform of ``resolved``. Shared: read it, never change it."""
        template = copy.deepcopy(self.resolved.template)
        template["Transform"] = "AWS::Serverless-2016-10-31"
        return sam_transform(template, self.parameters, self.stack)

    @functools.cached_property
    def created(self) -> dict[str, Any]:
        """The resources of ``transformed`` CloudFormation creates: those
        whose condition holds. Shared: read it, never change it."""
        return self.kept(self.transformed["Resources"])

    def kept(self, entries: dict[str, Any]) -> dict[str, Any]:
        """``entries`` (resources, outputs) without those a false condition
        leaves out."""
        return {
            name: entry
            for name, entry in entries.items()
            if "Condition" not in entry or self.condition(entry["Condition"])
        }

    @functools.cached_property
    def _local(self) -> Resolution:
        """The same with the values a local run gives the functions (LOCAL_DEFAULTS)."""
        return resolve(self.raw, self.local_parameters, self.stack)

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
        resources = self.resolved.template["Resources"]
        for logical_id, resource in resources.items():
            if resource["Type"] != "AWS::Serverless::Function":
                continue
            props = resource["Properties"]
            module, handler = props["Handler"].rsplit(".", 1)
            # Only the stack's own layers run locally: a layer given by ARN
            # (the OpenTelemetry one) is AWS's, and left out when not chosen.
            # SAM puts Globals' layers before the function's own.
            layers = [
                layer
                for layer in [*globals_.get("Layers", []), *props.get("Layers", [])]
                if isinstance(layer, dict) and layer.get("Ref") in resources
            ]
            timeout = props.get("Timeout", globals_.get("Timeout", 3))
            specs[logical_id] = FunctionSpec(
                logical_id=logical_id,
                code_dir=ROOT / props["CodeUri"],
                module=module,
                handler=handler,
                layer_dirs=tuple(ROOT / resources[ref["Ref"]]["Properties"]["ContentUri"] for ref in layers),
                timeout_seconds=float(self._value(timeout, {}, self.parameters)),
            )
        return specs

    def route_auth(self) -> dict[tuple[str, str], RouteAuth]:
        """Each API route's authentication, by (METHOD, path), as the
        template's Api events say for the parameters' values: the event's
        Authorizer, else its API's DefaultAuthorizer; its ApiKeyRequired."""
        resources = self.resolved.template["Resources"]
        found = {}
        for resource in resources.values():
            if resource["Type"] != "AWS::Serverless::Function":
                continue
            for event in resource["Properties"].get("Events", {}).values():
                if event["Type"] != "Api":
                    continue
                props = event["Properties"]
                api = resources[props["RestApiId"]["Ref"]]["Properties"].get("Auth", {})
                auth = props.get("Auth", {})
                authorizer = auth.get("Authorizer", api.get("DefaultAuthorizer", "NONE"))
                api_key = auth.get("ApiKeyRequired", api.get("ApiKeyRequired", False))
                found[props["Method"].upper(), props["Path"]] = RouteAuth(
                    sigv4=self._value(authorizer, {}, self.parameters) == "AWS_IAM",
                    api_key=self._value(api_key, {}, self.parameters) == "true",
                )
        return found

    def environment(self, logical_id: str, physical_names: dict[str, str]) -> dict[str, str]:
        """A function's environment variables as a local run gives them:
        Globals merged with its own, the parameters' values with
        LOCAL_DEFAULTS, and Refs to resources as ``physical_names``."""
        globals_ = self.raw.get("Globals", {}).get("Function", {})
        variables = dict(globals_.get("Environment", {}).get("Variables", {}))
        own = self._local.template["Resources"][logical_id]["Properties"].get("Environment", {})
        variables.update(own.get("Variables", {}))
        return {
            key: self._value(value, physical_names, self.local_parameters) for key, value in variables.items()
        }

    def _value(self, value: Any, physical_names: dict[str, str], parameters: dict[str, str]) -> str:
        """A value the language extensions have resolved (or Globals', which
        they leave as written: a literal or a Ref) as CloudFormation gives
        it: literals, Refs to ``parameters``, to the stack's pseudo
        parameters (AWS::StackName) and to resources (``physical_names``)."""
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, str | int | float):
            return str(value)
        if isinstance(value, dict) and set(value) == {"Ref"}:
            ref = value["Ref"]
            if ref in parameters:
                return parameters[ref]
            if ref in self.stack.values:
                return self.stack.values[ref]
            if ref in physical_names:
                return physical_names[ref]
        raise ValueError(f"cannot resolve {value!r} outside AWS; give it a local value")

    def condition(self, name: str) -> bool:
        """The value of one of the template's Conditions with its parameters'
        values (defaults, or the overrides)."""
        if name not in self.raw.get("Conditions", {}):
            raise ValueError(f"template.yaml has no condition {name!r}")
        return self.resolved.conditions[name]

    def holds(self, expression: Any) -> bool:
        """A condition expression written in place (a rule's RuleCondition)
        with the parameters' values."""
        return self.resolved.holds(expression)

    def refusals(self) -> list[tuple[str, str]]:
        """The template's Rules that refuse these parameters' values, as
        CloudFormation would before deploying anything: (the rule, the
        AssertDescription of each assertion that fails)."""
        found = []
        for name, rule in self.raw.get("Rules", {}).items():
            if "RuleCondition" in rule and not self.holds(rule["RuleCondition"]):
                continue
            found += [
                (name, assertion["AssertDescription"])
                for assertion in rule["Assertions"]
                if not self.holds(assertion["Assert"])
            ]
        return found


@functools.cache
def default_template() -> Template:
    return Template()


@functools.cache
def template_with(overrides: tuple[tuple[str, str], ...], stack: Stack = STACK) -> Template:
    """template.yaml read with these parameters' values (sorted pairs) in
    ``stack``, once per process, so that what is worked out of it (its
    resolution, its transform: about a second) is too, for every reader:
    the template tests and scripts/parameter_changes.py. Shared: read it,
    never change it."""
    return Template(parameter_overrides=dict(overrides), stack=stack)
