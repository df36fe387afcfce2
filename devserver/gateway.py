"""What API Gateway does to a request before a function runs, in the dev
server: authenticate it as the deployed stage would (ClientAuth), authorize
it as API Gateway does (the caller's IAM policy and the API's resource
policy, devserver.policy.gateway_decision), and give it a request id of its
own.

Authentication is off unless ClientAuth is given (``--parameter
ClientAuth=...``): then each route takes what template.yaml says for that
value (localrun.template.Template.route_auth), SigV4 checked by
devserver.sigv4 against the credentials the dev server was given, API keys
against the keys it printed at start or was given, and every request is
held to the API's resource policy where template.yaml makes one
(CallerOrganizationId, CallerAccounts, EndpointType PRIVATE). Off, every
route answers unsigned callers, as `make dev` always has, admin included.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import string
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from devserver.identities import (
    INVOKE,
    LOCAL_API_ID,
    ApiArn,
    Identity,
    IdentitySpec,
    api_arn,
    identities_of,
    resource_policy,
)
from devserver.policy import (
    ALLOWED,
    CONDITION_KEYS,
    EXPLICITLY_DENIED,
    Decision,
    Policy,
    PolicyError,
    Statement,
    gateway_decision,
)
from devserver.sigv4 import SERVICE, Key, Received, Refused, verify
from localrun.template import ROOT, RouteAuth, Template

# The account in the ARNs of local stand-ins (as localrun.invoke's context).
LOCAL_ACCOUNT = "123456789012"
DEFAULT_REGION = "us-east-1"


@dataclass(frozen=True)
class Stamp:
    """What API Gateway gives one request: its ids and its arrival time."""

    request_id: str
    extended_request_id: str
    epoch_ms: int

    @classmethod
    def now(cls) -> Stamp:
        # API Gateway's extended ids are 16 characters of base64.
        extended = base64.b64encode(secrets.token_bytes(10)).decode()
        return cls(str(uuid.uuid4()), extended, int(datetime.now(UTC).timestamp() * 1000))

    def stamp(self, event: dict[str, Any], identity: Mapping[str, Any]) -> dict[str, Any]:
        """``event`` (SAM CLI's, which gives every request of a server the
        same requestId and time) with this request's, and the caller as the
        gateway authenticated it."""
        context = event.setdefault("requestContext", {})
        arrived = datetime.fromtimestamp(self.epoch_ms / 1000, UTC)
        context["requestId"] = self.request_id
        context["extendedRequestId"] = self.extended_request_id
        context["requestTimeEpoch"] = self.epoch_ms
        context["requestTime"] = arrived.strftime("%d/%b/%Y:%H:%M:%S +0000")
        context.setdefault("identity", {}).update(identity)
        return event


class Denied(Refused):
    """A request the caller's policy or the API's resource policy does not
    allow: API Gateway's ACCESS_DENIED, and what decided it, for the console."""

    def __init__(self, reason: str, identity: Identity | None, resource: str, why: str) -> None:
        super().__init__("ACCESS_DENIED", reason)
        self.identity = identity
        self.resource = resource
        self.why = why

    def console(self) -> str:
        """The console's line: who, what, on which resource, and which statement decided."""
        who = "an unsigned request"
        if self.identity is not None:
            who = f"identity {self.identity.name} ({self.identity.key.access_key})"
        return f"access denied: {who} execute-api:Invoke on {self.resource}: {self.why}"


@dataclass(frozen=True)
class Credentials:
    """The key SigV4 requests are checked against, and where it came from."""

    key: Key
    source: str
    account: str = LOCAL_ACCOUNT
    # Where the pair the dev server made is kept between runs (None: found, not made).
    key_file: Path | None = None


def found_credentials(environ: Mapping[str, str]) -> Credentials | None:
    """The credentials the clients would find in ``environ``: the AWS_*
    variables (AWS_CREDENTIAL_EXPIRATION included), else the static keys of
    the profile (AWS_PROFILE, else default). Nothing that needs the network
    (roles, SSO, instance metadata) is tried."""
    from botocore.credentials import EnvProvider
    from botocore.session import Session
    from botocore.utils import parse_timestamp

    # Read without the expiry: botocore would refresh (and fail on) an expired
    # pair, where the gateway still knows it and answers expired_token.
    static = EnvProvider(
        environ={k: v for k, v in environ.items() if k != "AWS_CREDENTIAL_EXPIRATION"}
    ).load()
    if static is not None:
        expiry = environ.get("AWS_CREDENTIAL_EXPIRATION")
        expires = parse_timestamp(expiry) if expiry else None
        key = Key(static.access_key, static.secret_key, static.token, expires)
        return Credentials(key, "AWS_ACCESS_KEY_ID")
    session = Session()
    for provider in session.get_component("credential_provider").providers:
        if provider.METHOD in ("shared-credentials-file", "config-file"):
            found = provider.load()
            if found is not None:
                key = Key(found.access_key, found.secret_key, found.token)
                return Credentials(key, f"profile {session.profile or 'default'}")
    return None


def made_credentials(key_file: Path) -> Credentials:
    """A key pair for a developer with none: the one kept in ``key_file``
    (in the dev server's state directory), made and kept there the first
    time, so the pair exported once keeps working after a restart."""
    from devserver.state import kept_key_pair

    (access_key, secret_key), made = kept_key_pair(key_file, _new_key_pair)
    how = "made now" if made else "made before"
    source = f"{how}, kept in {shown_path(key_file)}"
    return Credentials(Key(access_key, secret_key), source, key_file=key_file)


def _new_key_pair() -> tuple[str, str]:
    upper = string.ascii_uppercase + string.digits
    access_key = "AKIA" + "".join(secrets.choice(upper) for _ in range(16))
    return access_key, secrets.token_urlsafe(30)


def shown_path(path: Path) -> str:
    """``path`` as a developer would find it: from where they are, or from
    the project's root."""
    for base in (Path.cwd(), ROOT):
        try:
            return str(path.resolve().relative_to(base.resolve()))
        except ValueError:
            continue
    return str(path)


def region_of(environ: Mapping[str, str]) -> str:
    """The region the clients would sign for: AWS_REGION, AWS_DEFAULT_REGION
    or the profile's, else us-east-1."""
    from botocore.session import Session

    return (
        environ.get("AWS_REGION")
        or environ.get("AWS_DEFAULT_REGION")
        or Session().get_config_variable("region")
        or DEFAULT_REGION
    )


def api_key_id(key: str) -> str:
    """A key's id, as API Gateway names a key apart from its value."""
    return hashlib.sha256(key.encode()).hexdigest()[:10]


def made_api_key() -> str:
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(40))


@dataclass
class Gateway:
    """Authentication as the deployed stage does it for ``client_auth``
    (None: off). ``routes``: each route's RouteAuth for that value.
    ``identities``: access keys whose signed requests are evaluated against
    a policy, by key; the dev server's own ``credentials`` may call every
    route. ``arn``: how a request is named in IAM."""

    client_auth: str | None = None
    routes: Mapping[tuple[str, str], RouteAuth] = field(default_factory=dict)
    credentials: Credentials | None = None
    api_keys: Sequence[str] = ()
    region: str = DEFAULT_REGION
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    identities: Mapping[str, Identity] = field(default_factory=dict)
    arn: ApiArn | None = None
    # The API's resource policy (None: it has none), the Organization of the
    # stack's account, and the VPC endpoint requests come through (None: none).
    resource_policy: Policy | None = None
    organization: str | None = None
    source_vpce: str | None = None

    def _keys(self) -> dict[str, Key]:
        keys = {access_key: identity.key for access_key, identity in self.identities.items()}
        if self.credentials is not None:
            keys[self.credentials.key.access_key] = self.credentials.key
        return keys

    def authenticate(self, method: str, resource: str, received: Received) -> dict[str, Any]:
        """The caller's identity fields (requestContext.identity) for a
        request to ``resource``; raises Refused, saying what to do."""
        need = self.routes.get((method, resource)) if self.client_auth else None
        identity: dict[str, Any] = {}
        if need is None:
            return identity
        route = f"{method} {resource}"
        if need.sigv4:
            try:
                key = verify(received, self._keys(), self.region, self.clock())
            except Refused as refused:
                raise Refused(refused.kind, self._advice(refused, route), refused.error_type) from None
            who = self.identities.get(key.access_key) or self._own()
            self._authorize(who, method, received.path)
            identity |= {
                "accessKey": key.access_key,
                "accountId": who.account,
                "caller": key.access_key,
                "user": key.access_key,
                "userArn": who.arn,
            }
        elif self.resource_policy is not None:
            self._authorize(None, method, received.path)
        if need.api_key:
            given = received.header("x-api-key")
            if not given or not any(
                hmac.compare_digest(given[0].encode(), k.encode()) for k in self.api_keys
            ):
                what = "no x-api-key header" if not given else "an x-api-key that is none of the dev server's"
                raise Refused(
                    "INVALID_API_KEY",
                    f"Forbidden: {route} takes an API key (ClientAuth API_KEY) and the request has {what}: "
                    "send one of the keys its banner shows (made at start, or --api-key) in x-api-key",
                )
            identity |= {"apiKey": given[0], "apiKeyId": api_key_id(given[0])}
        return identity

    def _own(self) -> Identity:
        """The dev server's own credentials: every route its IAM policy's,
        in the stack's account and Organization."""
        assert self.credentials is not None
        assert self.arn is not None
        key, arn = self.credentials.key, self.arn
        return Identity("the dev server's own", key, None, arn.account, self.organization, arn.partition)

    def _authorize(self, who: Identity | None, method: str, path: str) -> None:
        """Raises Denied unless API Gateway would let ``who`` (None: an
        unsigned request) invoke the request's ARN: its IAM policy and the
        API's resource policy, each as IAM decides it, together as API
        Gateway combines them (devserver.policy.gateway_decision)."""
        assert self.arn is not None
        resource = self.arn.of(method, path)
        context = {} if who is None else who.context()
        if self.source_vpce:
            context["aws:SourceVpce"] = self.source_vpce
        mine = None if who is None else Decision(ALLOWED, None)  # the dev server's own: every route
        if who is not None and who.policy is not None:
            mine = who.policy.decide(INVOKE, resource, context)
        theirs = None
        if self.resource_policy is not None:
            theirs = self.resource_policy.decide(INVOKE, resource, context)
        same_account = who is not None and who.account == self.arn.account
        result = gateway_decision(mine, theirs, same_account=same_account)
        if result == ALLOWED:
            return
        why = self._why(who, mine, theirs, same_account)
        user = "anonymous" if who is None else who.arn
        explicit = " with an explicit deny" if result == EXPLICITLY_DENIED else ""
        reason = f"User: {user} is not authorized to perform: {INVOKE} on resource: {resource}{explicit}. "
        if who is None:
            reason += f"An unsigned request to this route: {why}"
        else:
            reason += f"Access key {who.key.access_key} is the dev server's identity {who.name}: {why}"
            if result != EXPLICITLY_DENIED and who.policy is not None:
                reason += f"; it may call {who.calls(self.arn)}"
        raise Denied(reason, who, resource, why)

    def _why(
        self, who: Identity | None, mine: Decision | None, theirs: Decision | None, same_account: bool
    ) -> str:
        """Which statement refused, or which policy allowed nothing, in words."""
        api_policy = "the API's resource policy"
        own_policy = who.policy.name if who is not None and who.policy is not None else ""
        for decision, name in ((mine, own_policy), (theirs, api_policy)):
            if decision is None or decision.result != EXPLICITLY_DENIED or decision.statement is None:
                continue
            said = decision.because(name)
            if any(condition.key == "aws:sourcevpce" for condition in decision.statement.conditions):
                through = self.source_vpce or "no VPC endpoint"
                said += f" (requests here come through {through}: --source-vpce)"
            return said
        theirs_said = "the API has no resource policy" if theirs is None else theirs.because(api_policy)
        if who is None or mine is None:
            return f"a route without IAM auth takes what the API's resource policy allows, and {theirs_said}"
        mine_said = mine.because(own_policy) if own_policy else "its own policy allows it"
        if same_account:
            return f"{mine_said}, and {theirs_said}"
        return (
            f"a caller of another account ({who.account}) needs both its own policy and the API's resource "
            f"policy to allow: {mine_said}; {theirs_said}"
        )

    def _advice(self, refused: Refused, route: str) -> str:
        """The gateway's reason, then what to do about it here."""
        reason = refused.reason.rstrip(".")
        admin = "; so does every admin route" if route.split()[1].startswith("/admin") else ""
        why = f"{route} takes SigV4 for {SERVICE} in {self.region} (ClientAuth {self.client_auth}{admin})"
        if refused.error_type == "MissingAuthenticationTokenException":
            return (
                f"{reason}: {why}. Sign it with the credentials its banner names: "
                "IamAuth() in the clients, idblocks --auth iam, curl --aws-sigv4"
            )
        if refused.kind == "MISSING_AUTHENTICATION_TOKEN":
            return (
                f"{reason}. {why}: send a whole SigV4 Authorization header "
                "(AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=...)"
            )
        if refused.kind == "ACCESS_DENIED":
            return f"{reason}. The dev server knows the access keys {self._known()}: sign with one. {why}"
        if refused.kind == "EXPIRED_TOKEN":
            return f"{reason}: refresh the credentials, and start the dev server with the new ones"
        return (
            f"{reason}. {why}: sign with the secret key of {self._whose(refused.access_key)}, "
            f"for {self.region}, with the clock right"
        )

    def _whose(self, access_key: str | None) -> str:
        """The access key a request was signed with, and whose it is here:
        the secret to sign with is that key's, whoever else the dev server knows."""
        own = self.credentials.key.access_key if self.credentials else None
        if access_key is None:
            return "its access key"
        if access_key == own:
            return f"access key {access_key} (the dev server's own)"
        if access_key in self.identities:
            return f"access key {access_key} (identity {self.identities[access_key].name})"
        return f"access key {access_key}, which the dev server does not know (it knows {self._known()})"

    def _known(self) -> str:
        """The access keys the dev server takes, its own first (never a secret)."""
        key = self.credentials.key if self.credentials else None
        known = [] if key is None else [key.access_key + (" with its session token" if key.token else "")]
        known += [f"{access_key} ({who.name})" for access_key, who in self.identities.items()]
        return ", ".join(known) or "none"

    def _where_from(self, who: Identity) -> str:
        """Where an identity is from, for the banner, when not the stack's own account."""
        assert self.arn is not None
        if who.account == self.arn.account and who.organization == self.organization:
            return ""
        return f"  (account {who.account}, {who.organization or 'in no Organization'})"

    def _describe_resource_policy(self, arn: ApiArn) -> list[str]:
        """The banner's lines on the API's resource policy."""
        if self.resource_policy is None:
            return [
                "  Resource  policy: none (the API's callers are its own account's, each by its IAM policy)"
            ]
        lines = ["  Resource  policy (template.yaml):"]
        lines += [f"            {_statement_line(each)}" for each in self.resource_policy.statements]
        organization = self.organization or "in no Organization (--organization)"
        through = self.source_vpce or "no VPC endpoint (--source-vpce)"
        lines.append(f"            account {arn.account}, {organization}; requests come through {through}")
        return lines

    def curl_auth(self, method: str, resource: str) -> str:
        """What curl needs to be let through to ``resource`` (curl signs SigV4 itself)."""
        need = self.routes.get((method, resource)) if self.client_auth else None
        added = ""
        if need is not None and need.sigv4:
            added += f' --aws-sigv4 "aws:amz:{self.region}:{SERVICE}"'
            added += ' --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY"'
            if self.credentials is not None and self.credentials.key.token:
                added += ' -H "x-amz-security-token: $AWS_SESSION_TOKEN"'
        if need is not None and need.api_key and self.api_keys:
            added += f" -H 'x-api-key: {self.api_keys[0]}'"
        return added

    def describe(self) -> list[str]:
        """The banner's lines on authentication."""
        if not self.client_auth:
            return [
                "  Auth      off: every route answers unsigned requests (the admin routes too);",
                "            --parameter ClientAuth=AWS_IAM, API_KEY or NONE: as a deployed stack does",
            ]
        clients = {
            "AWS_IAM": "next and batch take SigV4",
            "API_KEY": "next and batch take an API key in x-api-key",
            "NONE": "next and batch take anyone",
        }[self.client_auth]
        lines = [f"  Auth      ClientAuth {self.client_auth}: {clients}; the admin routes take SigV4"]
        if self.credentials is not None:
            key = self.credentials.key
            every = ": every route (the dev server's own)" if self.identities else ""
            lines.append(
                f"  SigV4     {SERVICE} in {self.region}, "
                f"access key {key.access_key} ({self.credentials.source}){every}"
            )
            if self.credentials.key_file is not None:
                lines.append(
                    f"            export AWS_ACCESS_KEY_ID={key.access_key} "
                    f"AWS_SECRET_ACCESS_KEY={key.secret_key} AWS_REGION={self.region}"
                )
                lines.append("            (the same pair after a restart; delete the file for a new one)")
        if self.identities and self.arn is not None:
            name_width = max(len(who.name) for who in self.identities.values())
            key_width = max(len(access_key) for access_key in self.identities)
            for access_key, who in self.identities.items():
                policy = who.policy.name if who.policy is not None else "every route"
                lines.append(
                    f"  Identity  {who.name:<{name_width}}  {access_key:<{key_width}}  "
                    f"{policy}: {who.calls(self.arn)}{self._where_from(who)}"
                )
            lines.append(
                f"  IAM       each request is {INVOKE} on {self.arn.prefix}<METHOD>/<path> "
                "(--region, --account, --api-id)"
            )
        if self.arn is not None:
            lines += self._describe_resource_policy(self.arn)
        for key in self.api_keys:
            lines.append(f"  API key   {key}   (export IDBLOCKS_API_KEY={key})")
        return lines


def _statement_line(statement: Statement) -> str:
    """A resource policy's statement for the banner: its name, its effect,
    and whom its conditions name."""
    conditions = ", ".join(
        f"{CONDITION_KEYS[condition.key]} {condition.operator} {' or '.join(condition.values)}"
        for condition in statement.conditions
    )
    name = statement.label.removeprefix("statement ").strip("'")
    return f"{name} ({statement.effect}{' if ' if conditions else ''}{conditions})"


def gateway_for(
    client_auth: str | None,
    environ: Mapping[str, str],
    api_keys: Sequence[str] = (),
    region: str | None = None,
    *,
    key_file: Path,
    template: Template,
    identities: Sequence[IdentitySpec] = (),
    account: str | None = None,
    api_id: str = LOCAL_API_ID,
    organization: str | None = None,
    source_vpce: str | None = None,
) -> Gateway:
    """The gateway for ``client_auth`` (None: off), with the credentials and
    region found in ``environ`` (the dev server's own, read before the
    functions' environment replaces it), else a pair made and kept in
    ``key_file``; ``identities``, their policies read from ``template`` or
    from their files; the API's resource policy, from ``template``; the
    stack's account's ``organization``, and the VPC endpoint requests come
    through (raises PolicyError)."""
    if not client_auth:
        return Gateway()
    credentials = found_credentials(environ) or made_credentials(key_file)
    account = account or environ.get("AWS_ACCOUNT_ID") or LOCAL_ACCOUNT
    credentials = replace(credentials, account=account)
    keys = (list(api_keys) or [made_api_key()]) if client_auth == "API_KEY" else []
    region = region or region_of(environ)
    arn = api_arn(template, region, account, api_id)
    found = identities_of(list(identities), template, arn, organization)
    if credentials.key.access_key in found:
        raise PolicyError(
            f"access key {credentials.key.access_key} is the dev server's own (it may call every route) "
            f"and identity {found[credentials.key.access_key].name}'s: give the identity another"
        )
    routes = template.route_auth()
    return Gateway(
        client_auth,
        routes,
        credentials,
        keys,
        region,
        identities=found,
        arn=arn,
        resource_policy=resource_policy(template, arn),
        organization=organization,
        source_vpce=source_vpce,
    )


# An absolute-form request target (RFC 9112, 3.2.2), as sent to a proxy:
# scheme://authority, then the path.
_ABSOLUTE_FORM = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/]*")


def target_as_sent(environ: Mapping[str, Any]) -> tuple[str, str]:
    """The request's path and query as sent, percent-encoded: the one
    reading that routing, SigV4 and the IAM resource all take, so the route
    run is the path signed and the path evaluated. The request line's
    target is in RAW_URI (devserver.server keeps it there as sent).

    A fragment ("#...") is no part of a request (clients never send one,
    and signers drop it). The query is whatever follows the first "?", a
    "://" in it included. An absolute-form target (http://host/path) is its
    path. An origin-form target is its path whatever it starts with:
    "//host/counters/x/next" is that path, whose first segment is empty,
    never a host followed by /counters/x/next; no route has an empty
    segment, so it names none, as at API Gateway."""
    from urllib.parse import quote

    target = environ.get("RAW_URI") or environ.get("REQUEST_URI")
    if target is None:  # a WSGI test client: no request line, only the decoded path
        target = quote(environ.get("PATH_INFO", "")) + "?" + environ.get("QUERY_STRING", "")
    before, _, query = target.partition("#")[0].partition("?")
    absolute = _ABSOLUTE_FORM.match(before)
    path = (before[absolute.end() :] or "/") if absolute else before
    return path, query


def received_from(environ: Mapping[str, Any], headers: Sequence[tuple[str, str]], body: bytes) -> Received:
    """The request as it reached the server: its path and query as sent
    (target_as_sent), not as decoded."""
    path, query = target_as_sent(environ)
    return Received(environ.get("REQUEST_METHOD", "GET"), path, query, headers, body)
