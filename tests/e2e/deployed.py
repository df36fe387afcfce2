"""Run tests/e2e against a deployed stack (make test-deployed).

    python -m tests.e2e.deployed --stack idblocks-dev [--region eu-west-1]
    python -m tests.e2e.deployed --url https://abc123.execute-api.eu-west-1.amazonaws.com/v1
    python -m tests.e2e.deployed --url https://ids.example.com/v1 --region eu-west-1
    python -m tests.e2e.deployed --stack idblocks-dev --client-counter orders \\
        --client-role-arn arn:aws:iam::123456789012:role/orders-service --other-counter invoices
    python -m tests.e2e.deployed --stack idblocks-dev --other-account-counter orders \\
        --other-account-role-arn arn:aws:iam::210987654321:role/orders-service

The URL comes from the stack's ApiUrl output (a custom domain's URL when the
stack has one); what it runs against is a deployed stack, so requests are
signed with the caller's AWS credentials (botocore's usual chain) for the
stack's region: --region, else the region the stack was read from, else the
one an execute-api URL names, else the AWS configuration's. With a least-privileged
client principal (a role to assume, or a profile), the suite also shows that
it can call next and batch on its counter and nothing else: no admin route,
no other counter, no function directly (tests/e2e/test_least_privilege.py).
With a role (or profile) of another account the stack lets in
(CallerOrganizationId, CallerAccounts), whose own policy is the stack's
CallerPolicy output, the suite shows that it takes IDs of its counter and is
refused the admin routes.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.e2e.target import (
    CLIENT_COUNTER_VARIABLE,
    CLIENT_COUNTERS_VARIABLE,
    CLIENT_PROFILE_VARIABLE,
    CLIENT_ROLE_VARIABLE,
    DEPLOYED_VARIABLE,
    OTHER_ACCOUNT_COUNTER_VARIABLE,
    OTHER_ACCOUNT_PROFILE_VARIABLE,
    OTHER_ACCOUNT_ROLE_VARIABLE,
    OTHER_COUNTER_VARIABLE,
    REGION_VARIABLE,
    URL_VARIABLE,
    read_stack,
)

USAGE = "make test-deployed needs STACK=<stack name> or URL=<the stack's ApiUrl>"
STACK_VARIABLE = "IDBLOCKS_E2E_STACK"
ROLE_ARN = re.compile(r"arn:aws[a-z-]*:iam::[0-9]{12}:role/[\w+=,.@/-]{1,512}")
# An API's own endpoint names its region, a private API's endpoint-specific
# name too (<api-id>-<vpce-id>.execute-api...); a custom domain does not.
EXECUTE_API_HOST = re.compile(
    r"[a-z0-9]+(?:-vpce-[0-9a-f]+)?\.execute-api\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?"
)


@dataclass(frozen=True)
class Deployment:
    """The stack under test: its URL, the region its requests are signed
    for, and its ClientCounters when known (from the stack or an option)."""

    url: str
    region: str
    client_counters: str | None = None


def configured_region() -> str | None:
    """The region the AWS configuration names, as the client reads it."""
    import botocore.session

    return os.environ.get("AWS_REGION") or botocore.session.get_session().get_config_variable("region")


def resolve(
    stack: str | None,
    url: str | None,
    region: str | None = None,
    client_counters: str | None = None,
    *,
    cloudformation: Any = None,
    configured: Callable[[], str | None] = configured_region,
) -> Deployment:
    """Where the deployed stack is and the region to sign for; SystemExit
    with one line saying what is missing. A stack is read (its ApiUrl, unless
    a URL is given too, and its ClientCounters) in the region CloudFormation
    is asked in, which is the API's."""
    if stack:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            if cloudformation is None:
                import boto3

                cloudformation = boto3.client("cloudformation", region_name=region)
            found = read_stack(stack, cloudformation)
        except (BotoCoreError, ClientError, ValueError) as exc:
            raise SystemExit(f"cannot read the ApiUrl of stack {stack}: {exc}") from exc
        return Deployment(
            (url or found.url).rstrip("/"),
            region or cloudformation.meta.region_name,
            client_counters or found.parameters.get("ClientCounters"),
        )
    if not url:
        raise SystemExit(USAGE)
    region = region or _region_in(url) or configured()
    if not region:
        raise SystemExit(
            f"REGION=<the stack's region> is needed: {url} does not name it, nor does the AWS configuration"
        )
    return Deployment(url.rstrip("/"), region, client_counters)


def _region_in(url: str) -> str | None:
    match = EXECUTE_API_HOST.fullmatch(urlsplit(url).hostname or "")
    return match[1] if match else None


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    """The options (empty ones, as make passes unset variables, count as
    not given) and what is left for pytest. A client principal comes with
    the counter its policy names and one it does not, or not at all."""
    parser = argparse.ArgumentParser(prog="python -m tests.e2e.deployed", description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default=None)
    parser.add_argument("--url", default=None)
    parser.add_argument("--region", default=None)
    principal = parser.add_argument_group("a least-privileged client principal (optional)")
    principal.add_argument(
        "--client-role-arn", default=None, help="a role to assume, e.g. one with ClientPolicyArn"
    )
    principal.add_argument("--client-profile", default=None, help="or a profile with such credentials")
    principal.add_argument("--client-counter", default=None, help="a counter the principal's policy names")
    principal.add_argument("--other-counter", default=None, help="a counter its policy does not name")
    principal.add_argument(
        "--client-counters",
        default=None,
        help="the stack's ClientCounters (read from the stack when --stack is given)",
    )
    caller = parser.add_argument_group("a caller of another account the stack lets in (optional)")
    caller.add_argument(
        "--other-account-role-arn", default=None, help="a role of that account to assume, with CallerPolicy"
    )
    caller.add_argument("--other-account-profile", default=None, help="or a profile with such credentials")
    caller.add_argument("--other-account-counter", default=None, help="a counter ClientCounters names")
    args, pytest_args = parser.parse_known_args(argv)
    for name, value in vars(args).items():
        setattr(args, name, value or None)
    if args.client_role_arn and args.client_profile:
        parser.error("give --client-role-arn or --client-profile, not both")
    if args.client_role_arn and not ROLE_ARN.fullmatch(args.client_role_arn):
        parser.error(f"--client-role-arn is not a role's ARN: {args.client_role_arn!r}")
    given = bool(args.client_role_arn or args.client_profile)
    if given and not (args.client_counter and args.other_counter):
        parser.error("a client principal needs --client-counter and --other-counter")
    if not given and (args.client_counter or args.other_counter):
        parser.error("--client-counter and --other-counter need --client-role-arn or --client-profile")
    if given and args.client_counter == args.other_counter:
        parser.error("--other-counter must be a counter the principal's policy does not name")
    if args.other_account_role_arn and args.other_account_profile:
        parser.error("give --other-account-role-arn or --other-account-profile, not both")
    if args.other_account_role_arn and not ROLE_ARN.fullmatch(args.other_account_role_arn):
        parser.error(f"--other-account-role-arn is not a role's ARN: {args.other_account_role_arn!r}")
    other_account = bool(args.other_account_role_arn or args.other_account_profile)
    if other_account != bool(args.other_account_counter):
        parser.error(
            "a caller of another account needs --other-account-counter (a counter ClientCounters names), "
            "and --other-account-counter a caller (--other-account-role-arn or --other-account-profile)"
        )
    return args, pytest_args


def environment(args: argparse.Namespace, deployment: Deployment) -> dict[str, str]:
    """What the runner tells tests/e2e (target.py reads it): the URL, that
    it is a deployed stack's, its region, and the client principal."""
    values = {
        URL_VARIABLE: deployment.url,
        DEPLOYED_VARIABLE: "1",
        REGION_VARIABLE: deployment.region,
        STACK_VARIABLE: args.stack,
        CLIENT_ROLE_VARIABLE: args.client_role_arn,
        CLIENT_PROFILE_VARIABLE: args.client_profile,
        CLIENT_COUNTER_VARIABLE: args.client_counter,
        OTHER_COUNTER_VARIABLE: args.other_counter,
        CLIENT_COUNTERS_VARIABLE: deployment.client_counters,
        OTHER_ACCOUNT_ROLE_VARIABLE: args.other_account_role_arn,
        OTHER_ACCOUNT_PROFILE_VARIABLE: args.other_account_profile,
        OTHER_ACCOUNT_COUNTER_VARIABLE: args.other_account_counter,
    }
    return {variable: value for variable, value in values.items() if value}


def main(argv: list[str] | None = None) -> int:
    args, pytest_args = parse_args(argv)
    deployment = resolve(args.stack, args.url, args.region, args.client_counters)
    print(f"tests/e2e against {deployment.url}, signed for {deployment.region}", flush=True)
    os.environ.update(environment(args, deployment))
    return int(pytest.main(["-p", "no:cacheprovider", "tests/e2e", *pytest_args]))


if __name__ == "__main__":
    sys.exit(main())
