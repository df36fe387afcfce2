"""Run tests/e2e against a deployed stack (make test-deployed).

    python -m tests.e2e.deployed --stack idblocks-dev [--region eu-west-1]
    python -m tests.e2e.deployed --url https://abc123.execute-api.eu-west-1.amazonaws.com/v1

The URL comes from the stack's ApiUrl output; requests are signed with the
caller's AWS credentials (botocore's usual chain).
"""

from __future__ import annotations

import argparse
import os
import sys

import pytest

from tests.e2e.target import URL_VARIABLE, url_from_stack

USAGE = "make test-deployed needs STACK=<stack name> or URL=<the stack's ApiUrl>"


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default=None)
    parser.add_argument("--url", default=None)
    parser.add_argument("--region", default=None)
    args, pytest_args = parser.parse_known_args(argv)
    os.environ[URL_VARIABLE] = resolve_url(args.stack or None, args.url or None, args.region or None)
    print(f"tests/e2e against {os.environ[URL_VARIABLE]}", flush=True)
    return int(pytest.main(["-p", "no:cacheprovider", "tests/e2e", *pytest_args]))


if __name__ == "__main__":
    sys.exit(main())
