"""Run tests/e2e against a deployed stack (make test-deployed).

    python -m tests.e2e.deployed --stack idblocks-dev [--region eu-west-1]
    python -m tests.e2e.deployed --url https://abc123.execute-api.eu-west-1.amazonaws.com/v1
    python -m tests.e2e.deployed --stack idblocks-dev --client-counter orders \\
        --client-role-arn arn:aws:iam::123456789012:role/orders-service --other-counter invoices

The URL comes from the stack's ApiUrl output; requests are signed with the
caller's AWS credentials (botocore's usual chain). With a least-privileged
client principal (a role to assume, or a profile), the suite also shows that
it can call next and batch on its counter and nothing else: no admin route,
no other counter, no function directly (tests/e2e/test_least_privilege.py).
"""

from __future__ import annotations

import argparse
import os
import re
import sys

import pytest

from tests.e2e.target import (
    CLIENT_COUNTER_VARIABLE,
    CLIENT_PROFILE_VARIABLE,
    CLIENT_ROLE_VARIABLE,
    OTHER_COUNTER_VARIABLE,
    URL_VARIABLE,
    url_from_stack,
)

USAGE = "make test-deployed needs STACK=<stack name> or URL=<the stack's ApiUrl>"
STACK_VARIABLE = "IDBLOCKS_E2E_STACK"
ROLE_ARN = re.compile(r"arn:aws[a-z-]*:iam::[0-9]{12}:role/[\w+=,.@/-]{1,512}")


def resolve_url(stack: str | None, url: str | None, region: str | None = None) -> str:
    if url:
        return url.rstrip("/")
    if not stack:
        raise SystemExit(USAGE)
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return url_from_stack(stack, boto3.client("cloudformation", region_name=region))
    except (BotoCoreError, ClientError, ValueError) as exc:
        raise SystemExit(f"cannot read the ApiUrl of stack {stack}: {exc}") from exc


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
    return args, pytest_args


def main(argv: list[str] | None = None) -> int:
    args, pytest_args = parse_args(argv)
    os.environ[URL_VARIABLE] = resolve_url(args.stack, args.url, args.region)
    print(f"tests/e2e against {os.environ[URL_VARIABLE]}", flush=True)
    for variable, value in (
        (STACK_VARIABLE, args.stack),
        (CLIENT_ROLE_VARIABLE, args.client_role_arn),
        (CLIENT_PROFILE_VARIABLE, args.client_profile),
        (CLIENT_COUNTER_VARIABLE, args.client_counter),
        (OTHER_COUNTER_VARIABLE, args.other_counter),
    ):
        if value:
            os.environ[variable] = value
    return int(pytest.main(["-p", "no:cacheprovider", "tests/e2e", *pytest_args]))


if __name__ == "__main__":
    sys.exit(main())
