"""template.yaml as CloudFormation will see it: AWS::LanguageExtensions
resolved with given parameter values and a stack's pseudo parameters (the one
reading localrun.template makes for the dev server and `make sar` too: SAM
CLI's own implementation), then the SAM transform (samtranslator, the library
CloudFormation's transform runs). translate_sar: the template the Serverless
Application Repository publishes (scripts/sar_template.py), which has the SAM
transform alone."""

from __future__ import annotations

import functools
from typing import Any

from localrun.template import ROOT, STACK, Stack, Template, template_with
from localrun.template import sam_transform as transform_sam
from scripts.sar_template import SarTemplate, build


def _template(overrides: tuple[tuple[str, str], ...], stack: Stack) -> Template:
    # The one cache of every reader of the template, scripts/parameter_changes.py's too.
    return template_with(overrides, stack)


def _translate(overrides: tuple[tuple[str, str], ...], stack: Stack) -> dict[str, Any]:
    return _template(overrides, stack).transformed


def created_in(stack: Stack, **overrides: str) -> dict[str, Any]:
    """The resources of translate_in(stack, **overrides) CloudFormation
    creates: those whose condition holds. Shared: read them, never change
    them."""
    return _template(tuple(sorted(overrides.items())), stack).created


def translate(**overrides: str) -> dict[str, Any]:
    """template.yaml as CloudFormation deploys it in the stack STACK, given
    these parameters' values (the others' defaults). Shared: read it, never
    change it."""
    return _translate(tuple(sorted(overrides.items())), STACK)


def translate_in(stack: Stack, **overrides: str) -> dict[str, Any]:
    """The same in another stack: another name, region or account."""
    return _translate(tuple(sorted(overrides.items())), stack)


def method_security(cfn: dict[str, Any]) -> dict[tuple[str, str], list[dict[str, list]]]:
    """(METHOD, path) -> the OpenAPI security requirement API Gateway enforces."""
    body = cfn["Resources"]["Api"]["Properties"]["Body"]
    return {
        (method.upper(), path): operation.get("security", [])
        for path, operations in body["paths"].items()
        for method, operation in operations.items()
    }


def parameter_defaults(template: dict[str, Any]) -> dict[str, str]:
    """Each parameter of ``template`` with the value a stack given none
    takes: its Default, as a string ('' where it has none)."""
    return {name: str(spec.get("Default", "")) for name, spec in template["Parameters"].items()}


@functools.cache
def _cached_build(settings: tuple[tuple[str, str], ...]) -> SarTemplate:
    return build(dict(settings))


def cached_build(settings: dict[str, str] | None = None) -> SarTemplate:
    """scripts.sar_template.build(settings), built once per settings (each
    build takes about 0.14 s, and a case needs it several times). Shared:
    read it, never change it; a test that changes it calls build()."""
    return _cached_build(tuple(sorted((settings or {}).items())))


@functools.cache
def _translate_sar(
    settings: tuple[tuple[str, str], ...], overrides: tuple[tuple[str, str], ...]
) -> dict[str, Any]:
    template = _cached_build(settings).template
    parameters = parameter_defaults(template)
    unknown = set(dict(overrides)) - set(parameters)
    if unknown:
        raise ValueError(f"the published template has no parameter(s) {sorted(unknown)}")
    return transform_sam(template, parameters | dict(overrides))


def translate_sar(settings: dict[str, str] | None = None, **overrides: str) -> dict[str, Any]:
    """The template the Serverless Application Repository publishes
    (scripts/sar_template.py, with a publisher's ``settings``) as
    CloudFormation sees it: no language extensions, only the SAM transform,
    given the stack's parameter values."""
    return _translate_sar(tuple(sorted((settings or {}).items())), tuple(sorted(overrides.items())))


def samconfig_overrides(environment: str) -> dict[str, str]:
    """The parameter values samconfig.toml's [environment] deploys with."""
    import tomllib

    config = tomllib.loads((ROOT / "samconfig.toml").read_text())
    pairs = config[environment]["deploy"]["parameters"].get("parameter_overrides", "").split()
    return dict(pair.split("=", 1) for pair in pairs)


def samconfig_environments() -> list[str]:
    import tomllib

    return [name for name in tomllib.loads((ROOT / "samconfig.toml").read_text()) if name != "version"]


@functools.cache
def parameter_sets() -> tuple[tuple[tuple[str, str], ...], ...]:
    """Every set of parameter values the template tests read it with: the
    defaults, each samconfig.toml environment's, and both sides of each
    change scripts/parameter_changes.py describes (every value of every
    parameter that lists its values, a custom domain, API keys with a quota,
    deep traces...)."""
    from scripts.parameter_changes import changes_of, values_of

    found = {(): None}
    for environment in samconfig_environments():
        found[tuple(sorted(samconfig_overrides(environment).items()))] = None
    for parameter in Template().parameters:
        for settings, before, after in changes_of(parameter):
            for value in (before, after):
                found[tuple(sorted(values_of(parameter, value, settings).items()))] = None
    return tuple(found)
