"""The one reading of template.yaml that the tests, the local runs and
`make sar` share (localrun.template.resolve): SAM CLI's own
AWS::LanguageExtensions, with a stack's pseudo parameters, then the SAM
transform (tests/support/sam.py). What the tests read must be what
CloudFormation would: a template cfn-lint finds no error in, with every
${...} left for CloudFormation still inside its Fn::Sub."""

from __future__ import annotations

import json
import re
from typing import Any

from cfnlint.api import ManualArgs, lint

from localrun.template import Template
from tests.support.sam import translate


def lint_errors_of(cfn: dict[str, Any], template: Template, region: str) -> list[str]:
    """cfn-lint's errors (not its warnings) on what CloudFormation creates:
    ``cfn`` without what a false condition of ``template`` leaves out."""
    kept = dict(cfn)
    for section in ("Resources", "Outputs"):
        kept[section] = template.kept(cfn.get(section, {}))
    found = lint(json.dumps(kept), config=ManualArgs(regions=[region]))
    return [f"{m.rule.id} {m.message} ({'/'.join(map(str, m.path))})" for m in found if m.rule.id[0] == "E"]


def _strings_outside_sub(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for key, item in value.items() if key != "Fn::Sub" for s in _strings_outside_sub(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings_outside_sub(item)]
    return []


def test_the_template_the_tests_read_is_one_cloudformation_takes():
    """The tests read ${AWS::StackName}-next as a plain string: the language
    extensions ran without pseudo parameters, and SAM CLI dropped the Fn::Sub
    around what it could not resolve (cfn-lint: 60 errors, E1029 and E3031,
    on what the tests read). The reading now has a stack's pseudo parameters
    and keeps an Fn::Sub wherever a resource is left for CloudFormation."""
    cfn = translate()
    assert [text for text in _strings_outside_sub(cfn) if re.search(r"\$\{[^!]", text)] == []
    assert lint_errors_of(cfn, Template(), "us-east-1") == []


def test_what_the_stack_names_is_resolved_and_what_cloudformation_names_is_kept():
    from localrun.template import STACK

    resources = translate()["Resources"]
    assert resources["Dashboard"]["Properties"]["DashboardName"] == f"{STACK.name}-{STACK.region}"
    statement = resources["AdminPolicy"]["Properties"]["PolicyDocument"]["Statement"][0]
    assert statement["Resource"][0] == {
        "Fn::Sub": f"arn:aws:execute-api:{STACK.region}:{STACK.account_id}:${{Api}}/v1/*/admin/counters"
    }


def test_an_escaped_variable_stays_escaped_while_its_function_stays():
    from localrun.template import resolve

    raw = {
        "Parameters": {"Stage": {"Type": "String", "Default": "v1"}},
        "Resources": {
            "Topic": {
                "Type": "AWS::SNS::Topic",
                "Properties": {
                    "DisplayName": {"Fn::Sub": "${Stage} ${!Literal} ${Queue.Arn}"},
                    "TopicName": {"Fn::Sub": "${AWS::StackName}-${Stage} ${!Literal}"},
                },
            },
            "Queue": {"Type": "AWS::SQS::Queue"},
        },
    }
    props = resolve(raw, {"Stage": "v2"}).template["Resources"]["Topic"]["Properties"]
    assert props["DisplayName"] == {"Fn::Sub": "v2 ${!Literal} ${Queue.Arn}"}
    assert props["TopicName"] == "idblocks-v2 ${Literal}"


def test_the_reading_is_sam_clis_pipeline_with_its_fn_sub_kept():
    """localrun.template.pipeline is SAM CLI's default pipeline (its
    processors, its resolvers in its order) save one resolver: a SAM CLI
    that changes its pipeline fails here, not in a silently different
    reading."""
    from samcli.lib.cfn_language_extensions.api import (
        create_default_intrinsic_resolver,
        create_default_pipeline,
    )
    from samcli.lib.cfn_language_extensions.models import TemplateProcessingContext
    from samcli.lib.cfn_language_extensions.resolvers import FnSubResolver

    from localrun.template import _resolver, pipeline

    context = TemplateProcessingContext(fragment={"Resources": {}})
    assert [type(p) for p in pipeline(context).processors] == [
        type(p) for p in create_default_pipeline(context).processors
    ]
    theirs = [type(r) for r in create_default_intrinsic_resolver(context).resolvers]
    ours = [type(r) for r in _resolver(context).resolvers]
    assert [t for t in ours if not issubclass(t, FnSubResolver)] == [
        t for t in theirs if t is not FnSubResolver
    ]
    assert [issubclass(t, FnSubResolver) for t in ours] == [t is FnSubResolver for t in theirs]
