"""The service under test, wherever it runs: a base URL and how to sign.

A dev server of the suite's own checks SigV4 as a deployed stack does
(ClientAuth AWS_IAM), with its own credentials for every route, and a client
and an admin identity (--identity) whose requests are evaluated against the
stack's ClientPolicy and AdminPolicy: the least-privileged principals of
tests/e2e/test_least_privilege.py (Target.identities). A URL given from
outside is a server that takes no signature unless it is a deployed
stack's. A deployed stack takes SigV4 on the admin
routes always, and on next/batch unless the stack was deployed with another
ClientAuth: then IDBLOCKS_E2E_API_KEY (API_KEY) or IDBLOCKS_E2E_CLIENT_AUTH=none.
Whether the URL is a deployed stack's is said, never read from its host name
(a custom domain's URL names neither execute-api nor the region):
IDBLOCKS_E2E_DEPLOYED=1, which make test-deployed sets, with the stack's
region in IDBLOCKS_E2E_REGION.

A least-privileged client principal (tests/e2e/test_least_privilege.py) is
IDBLOCKS_E2E_CLIENT_ROLE_ARN (a role to assume, e.g. one with only the
stack's ClientPolicyArn attached) or IDBLOCKS_E2E_CLIENT_PROFILE, with
IDBLOCKS_E2E_CLIENT_COUNTER (a counter its policy names) and
IDBLOCKS_E2E_OTHER_COUNTER (one it does not); IDBLOCKS_E2E_CLIENT_COUNTERS is
the stack's ClientCounters, the counters its client policy names, when known.

A principal of another account the stack lets in (CallerOrganizationId,
CallerAccounts) is IDBLOCKS_E2E_OTHER_ACCOUNT_ROLE_ARN or
IDBLOCKS_E2E_OTHER_ACCOUNT_PROFILE, a role or profile of that account whose
own policy is the stack's CallerPolicy output, with
IDBLOCKS_E2E_OTHER_ACCOUNT_COUNTER, a counter ClientCounters names.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

import requests

from idblocks import ApiKeyAuth, HttpBackend, IamAuth, NoAuth, RetryPolicy
from idblocks.auth import Auth

URL_VARIABLE = "IDBLOCKS_E2E_URL"
DEPLOYED_VARIABLE = "IDBLOCKS_E2E_DEPLOYED"
REGION_VARIABLE = "IDBLOCKS_E2E_REGION"
CLIENT_COUNTERS_VARIABLE = "IDBLOCKS_E2E_CLIENT_COUNTERS"
CLIENT_ROLE_VARIABLE = "IDBLOCKS_E2E_CLIENT_ROLE_ARN"
CLIENT_PROFILE_VARIABLE = "IDBLOCKS_E2E_CLIENT_PROFILE"
CLIENT_COUNTER_VARIABLE = "IDBLOCKS_E2E_CLIENT_COUNTER"
OTHER_COUNTER_VARIABLE = "IDBLOCKS_E2E_OTHER_COUNTER"
OTHER_ACCOUNT_ROLE_VARIABLE = "IDBLOCKS_E2E_OTHER_ACCOUNT_ROLE_ARN"
OTHER_ACCOUNT_PROFILE_VARIABLE = "IDBLOCKS_E2E_OTHER_ACCOUNT_PROFILE"
OTHER_ACCOUNT_COUNTER_VARIABLE = "IDBLOCKS_E2E_OTHER_ACCOUNT_COUNTER"


@dataclass(frozen=True)
class Target:
    url: str
    client_auth: Auth
    admin_auth: Auth
    # A deployed stack's region, which SigV4 signs for; None: from the host
    # name (execute-api) or the AWS configuration, or not signed at all.
    region: str | None = None
    # A dev server's least-privileged identities; a deployed stack's come
    # from the environment (ClientPrincipal.from_environment).
    identities: Identities | None = None

    @classmethod
    def unsigned(cls, url: str) -> Target:
        return cls(url.rstrip("/"), NoAuth(), NoAuth())

    @classmethod
    def dev_server(cls, url: str, own: tuple[str, str], region: str, identities: Identities) -> Target:
        """A dev server checking SigV4 for ``region``: next, batch and the
        admin routes signed with its own key pair ``own``, which may call
        every route (as the runner's own credentials against a stack)."""
        auth = IamAuth(region=region, session=static_session(*own))
        return cls(url.rstrip("/"), auth, auth, region, identities)

    @classmethod
    def deployed(cls, url: str, region: str | None = None, environ: Any = os.environ) -> Target:
        """A deployed stack: the admin routes signed for ``region``, next and
        batch as its ClientAuth takes them."""
        iam = IamAuth(region=region)
        client_auth: Auth = iam
        if environ.get("IDBLOCKS_E2E_API_KEY"):
            client_auth = ApiKeyAuth(environ["IDBLOCKS_E2E_API_KEY"])
        elif environ.get("IDBLOCKS_E2E_CLIENT_AUTH", "").lower() == "none":
            client_auth = NoAuth()
        return cls(url.rstrip("/"), client_auth, iam, region)

    @classmethod
    def from_environment(cls, url: str, environ: Any = os.environ) -> Target:
        """A URL given from outside: a deployed stack (signed) when the
        environment says so, else a server of ours that takes no signature."""
        if environ.get(DEPLOYED_VARIABLE) != "1":
            return cls.unsigned(url)
        return cls.deployed(url, environ.get(REGION_VARIABLE) or None, environ)

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        headers: dict[str, str] | None = None,
        raw: bytes | None = None,
    ) -> requests.Response:
        """One request, signed for its route, with no retry: the tests see
        exactly what the service answered. The URL is signed as it is sent
        (requests percent-encodes a path such as /counters/bad name!/next),
        or the signature would cover a path other than the one that arrives."""
        url = requests.utils.requote_uri(self.url + path)
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        auth = self.admin_auth if path.startswith("/admin/") else self.client_auth
        sent = {"Content-Type": "application/json"} if data is not None else {}
        sent |= auth.headers(method, url, data) | (headers or {})
        return requests.request(method, url, data=data, headers=sent, timeout=30)

    def backend(self, *, admin: bool = False) -> HttpBackend:
        # Generous: a cold Lambda or a busy machine must not fail the run.
        retry = RetryPolicy(attempts=10, deadline=120)
        return HttpBackend(self.url, auth=self.admin_auth if admin else self.client_auth, retry=retry)


def static_session(access_key: str, secret_key: str) -> Any:
    """A botocore session whose credentials are this key pair."""
    import botocore.session

    session = botocore.session.Session()
    session.set_credentials(access_key, secret_key)
    return session


@dataclass(frozen=True)
class ClientPrincipal:
    """A least-privileged caller: a role to assume, a profile or (a dev
    server's identity) a key pair; the counter its policy lets it take IDs
    from, and one its policy does not name."""

    role_arn: str | None
    profile: str | None
    counter: str
    other_counter: str
    key: tuple[str, str] | None = None

    @classmethod
    def from_environment(cls, environ: Any = os.environ) -> ClientPrincipal | None:
        role, profile = (
            environ.get(CLIENT_ROLE_VARIABLE) or None,
            environ.get(CLIENT_PROFILE_VARIABLE) or None,
        )
        if role is None and profile is None:
            return None
        return cls(role, profile, environ[CLIENT_COUNTER_VARIABLE], environ[OTHER_COUNTER_VARIABLE])

    @classmethod
    def of_another_account(cls, environ: Any = os.environ) -> ClientPrincipal | None:
        """A deployed stack's caller of another account, when given: it
        takes IDs from its counter, and no other counter is asked of it."""
        role, profile = (
            environ.get(OTHER_ACCOUNT_ROLE_VARIABLE) or None,
            environ.get(OTHER_ACCOUNT_PROFILE_VARIABLE) or None,
        )
        if role is None and profile is None:
            return None
        return cls(role, profile, environ[OTHER_ACCOUNT_COUNTER_VARIABLE], "")

    def session(self, sts: Any = None) -> Any:
        """A botocore session with this principal's credentials: the
        profile's, or the role's, assumed with the caller's own credentials
        and renewed before they expire."""
        import botocore.session
        from botocore.credentials import (
            AssumeRoleCredentialFetcher,
            CredentialProvider,
            DeferredRefreshableCredentials,
        )

        if self.key is not None:
            return static_session(*self.key)
        if self.profile is not None:
            return botocore.session.Session(profile=self.profile)
        source = botocore.session.Session()
        fetcher = AssumeRoleCredentialFetcher(
            client_creator=(lambda *args, **kwargs: sts) if sts is not None else source.create_client,
            source_credentials=source.get_credentials(),
            role_arn=self.role_arn,
            extra_args={"RoleSessionName": "idblocks-e2e-client"},
        )
        assumed = DeferredRefreshableCredentials(
            method="assume-role", refresh_using=fetcher.fetch_credentials
        )

        class AssumedRole(CredentialProvider):
            METHOD = CANONICAL_NAME = "idblocks-e2e-client-role"

            def load(self) -> Any:
                return assumed

        session = botocore.session.Session()
        session.get_component("credential_provider").insert_before("env", AssumedRole())
        return session

    def auth(self, sts: Any = None, region: str | None = None) -> Auth:
        return IamAuth(region=region, session=self.session(sts))

    def may_take_from_other_counter(self, client_counters: str | None) -> bool:
        """Whether the stack's ClientCounters (``*``, a name, or a prefix and
        ``*``) names the other counter too: then the client policy grants it,
        and its refusal cannot be shown. False when ClientCounters is unknown."""
        if client_counters is None:
            return False
        if client_counters.endswith("*"):
            return self.other_counter.startswith(client_counters[:-1])
        return self.other_counter == client_counters


@dataclass(frozen=True)
class Identities:
    """A dev server's least-privileged identities: the client (the stack's
    ClientPolicy with ``client_counters``) and the admin (its AdminPolicy)
    of the stack's account, and ``callers`` of other accounts, each with the
    stack's client policy as its own: ``member`` (of the stack's
    Organization), ``listed`` (of an account CallerAccounts names) and
    ``outsider`` (of neither)."""

    client: ClientPrincipal
    client_counters: str
    admin_key: tuple[str, str]
    callers: dict[str, ClientPrincipal] = field(default_factory=dict)

    def admin_auth(self, region: str | None) -> Auth:
        return IamAuth(region=region, session=static_session(*self.admin_key))


@dataclass(frozen=True)
class Stack:
    """What the tests need of a deployed stack: its ApiUrl output and its
    parameters (ClientCounters: which counters the client policy names)."""

    url: str
    parameters: dict[str, str]


def read_stack(stack: str, cloudformation: Any) -> Stack:
    """A deployed stack's ApiUrl and parameters, or ValueError saying what is missing."""
    stacks = cloudformation.describe_stacks(StackName=stack)["Stacks"]
    if not stacks:
        raise ValueError(f"stack {stack} not found")
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}
    if "ApiUrl" not in outputs:
        status = stacks[0].get("StackStatus", "unknown status")
        raise ValueError(f"stack {stack} ({status}) has no ApiUrl output: is it an idblocks stack, deployed?")
    parameters = {p["ParameterKey"]: p.get("ParameterValue", "") for p in stacks[0].get("Parameters", [])}
    return Stack(outputs["ApiUrl"].rstrip("/"), parameters)
