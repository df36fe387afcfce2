"""SigV4 as API Gateway checks it on an AWS_IAM route, for the dev server.

The signature is recomputed with botocore's own SigV4 (botocore is pinned),
for the request as it arrived: its method, its path as sent (percent-encoded),
its query string, the headers its SignedHeaders name with the values they
came with, its body, its X-Amz-Date, and the scope <date>/<region>/execute-api/
aws4_request; then compared in constant time. Each mistake is refused with
the gateway response type API Gateway uses for it and the reason in AWS's
own words (AWS's IAM guide, "Troubleshoot signed requests", and the API
Gateway knowledge-center page on 403s):

- no Authorization header: MISSING_AUTHENTICATION_TOKEN ("Missing
  Authentication Token");
- an Authorization header that is not a whole SigV4 one (IncompleteSignature):
  MISSING_AUTHENTICATION_TOKEN as well, the response that carries the
  gateway's incomplete-signature messages;
- a scope for another date, region or service, a time more than 5 minutes
  off, a signature that does not match: INVALID_SIGNATURE;
- an access key or session token it does not know: ACCESS_DENIED ("The
  security token included in the request is invalid.");
- credentials past their expiry: EXPIRED_TOKEN.

Signatures in the query string (presigned URLs) and the Date header in place
of X-Amz-Date are not read here: neither client uses them.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import unquote

from botocore.auth import SIGV4_TIMESTAMP, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.compat import HTTPHeaders
from botocore.credentials import Credentials

SERVICE = "execute-api"
ALGORITHM = "AWS4-HMAC-SHA256"
TERMINATOR = "aws4_request"
# How far X-Amz-Date may be from the gateway's clock, either way.
WINDOW = timedelta(minutes=5)


@dataclass(frozen=True)
class Key:
    """Credentials the gateway knows: an access key's secret, the session
    token that goes with it (temporary credentials), when they expire."""

    access_key: str
    secret_key: str
    token: str | None = None
    expires: datetime | None = None


# The x-amzn-ErrorType API Gateway sends with each kind of refusal.
ERROR_TYPES = {
    "MISSING_AUTHENTICATION_TOKEN": "MissingAuthenticationTokenException",
    "INVALID_SIGNATURE": "InvalidSignatureException",
    "ACCESS_DENIED": "AccessDeniedException",
    "EXPIRED_TOKEN": "ExpiredTokenException",
    "INVALID_API_KEY": "ForbiddenException",
}


class Refused(Exception):
    """A request the gateway refuses: ``kind`` is the gateway response type
    (template.yaml's GatewayResponses), ``reason`` says why, ``error_type``
    is the x-amzn-ErrorType API Gateway sends with it; ``access_key``: the
    one the request was signed with, when its Authorization header names
    one (for the advice: the key to sign with is that one's pair)."""

    def __init__(
        self, kind: str, reason: str, error_type: str | None = None, access_key: str | None = None
    ) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason
        self.error_type = error_type or ERROR_TYPES[kind]
        self.access_key = access_key


def incomplete(reason: str) -> Refused:
    return Refused("MISSING_AUTHENTICATION_TOKEN", reason, "IncompleteSignatureException")


def invalid(reason: str, auth: Authorization) -> Refused:
    return Refused("INVALID_SIGNATURE", reason, access_key=auth.access_key)


INVALID_TOKEN = "The security token included in the request is invalid."  # noqa: S105 - a message
MISMATCH = (
    "The request signature we calculated does not match the signature you provided. "
    "Check your AWS Secret Access Key and signing method."
)


@dataclass(frozen=True)
class Received:
    """A request as it reached the gateway: ``path`` and ``query`` as sent
    (percent-encoded), every header as (name, value), the body's bytes."""

    method: str
    path: str
    query: str
    headers: Sequence[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key.lower() == name]


@dataclass(frozen=True)
class Authorization:
    """The parts of an ``Authorization: AWS4-HMAC-SHA256 ...`` header."""

    access_key: str
    date: str
    region: str
    service: str
    terminator: str
    signed_headers: tuple[str, ...]
    signature: str


def parse_authorization(value: str) -> Authorization:
    algorithm, _, rest = value.strip().partition(" ")
    if algorithm != ALGORITHM:
        raise incomplete(f"Unsupported AWS 'algorithm': '{algorithm}' (SigV4 is {ALGORITHM})")
    parts = {}
    for part in (piece.strip() for piece in rest.split(",")):
        name, equals, given = part.partition("=")
        if not equals:
            raise incomplete(
                f"'{part}' not a valid key=value pair (missing equal-sign) in Authorization header"
            )
        parts[name.strip()] = given.strip()
    missing = [name for name in ("Credential", "Signature", "SignedHeaders") if not parts.get(name)]
    if missing:
        raise incomplete(" ".join(f"Authorization header requires '{name}' parameter." for name in missing))
    scope = parts["Credential"].split("/")
    if len(scope) != 5:
        raise incomplete(
            f"Credential '{parts['Credential']}' is not <access key>/<date>/<region>/<service>/{TERMINATOR}"
        )
    signed = tuple(name.strip().lower() for name in parts["SignedHeaders"].split(";"))
    return Authorization(*scope, signed_headers=signed, signature=parts["Signature"])


def verify(request: Received, keys: Mapping[str, Key], region: str, now: datetime) -> Key:
    """The key ``request`` is signed with, if API Gateway in ``region``
    would take its signature at ``now``; else raises Refused."""
    given = request.header("authorization")
    if not given:
        raise Refused("MISSING_AUTHENTICATION_TOKEN", "Missing Authentication Token")
    auth = parse_authorization(given[0])
    stamp, signed_at = _timestamp(request)
    if "host" not in auth.signed_headers:
        raise incomplete("'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization.")
    if auth.date != stamp[:8]:
        raise invalid(
            "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: "
            f"'{auth.date}' != '{stamp[:8]}'",
            auth,
        )
    if auth.region != region:
        raise invalid(
            f"Credential should be scoped to a valid region, not '{auth.region}' (this API is in '{region}')",
            auth,
        )
    if auth.service != SERVICE:
        raise invalid(
            f"Credential should be scoped to correct service: '{SERVICE}', not '{auth.service}'", auth
        )
    if auth.terminator != TERMINATOR:
        raise invalid(f"Credential should be scoped with a valid terminator: '{TERMINATOR}'", auth)
    _within_window(stamp, signed_at, now, auth)
    key = keys.get(auth.access_key)
    token = request.header("x-amz-security-token")
    if key is None or not _same(token[0] if token else None, key.token):
        raise Refused("ACCESS_DENIED", INVALID_TOKEN)
    if key.expires is not None and key.expires <= now:
        raise Refused("EXPIRED_TOKEN", "The security token included in the request is expired")
    if not hmac.compare_digest(_signature(request, auth, key, region, stamp), auth.signature):
        raise invalid(MISMATCH, auth)
    return key


def _timestamp(request: Received) -> tuple[str, datetime]:
    """X-Amz-Date as sent, and the time it names."""
    stamps = request.header("x-amz-date")
    if not stamps:
        raise incomplete(
            "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header."
        )
    try:
        signed = datetime.strptime(stamps[0], SIGV4_TIMESTAMP).replace(tzinfo=UTC)
    except ValueError:
        raise incomplete(
            f"X-Amz-Date must be in the ISO8601 Long Format (YYYYMMDD'T'HHMMSS'Z'): '{stamps[0]}'"
        ) from None
    return stamps[0], signed


def _within_window(stamp: str, signed: datetime, now: datetime, auth: Authorization) -> None:
    text = now.astimezone(UTC).strftime(SIGV4_TIMESTAMP)
    if signed < now - WINDOW:
        earliest = (now - WINDOW).strftime(SIGV4_TIMESTAMP)
        raise invalid(f"Signature expired: {stamp} is now earlier than {earliest} ({text} - 5 min.)", auth)
    if signed > now + WINDOW:
        latest = (now + WINDOW).strftime(SIGV4_TIMESTAMP)
        raise invalid(
            f"Signature not yet current: {stamp} is still later than {latest} ({text} + 5 min.)", auth
        )


def _same(given: str | None, known: str | None) -> bool:
    if given is None or known is None:
        return given is known
    return hmac.compare_digest(given.encode(), known.encode())


class _AsReceived(SigV4Auth):
    """botocore's SigV4 over exactly the headers the request signed, with
    the values they arrived with (botocore would pick its own set)."""

    def __init__(self, key: Key, region: str, signed: HTTPHeaders) -> None:
        super().__init__(Credentials(key.access_key, key.secret_key, key.token), SERVICE, region)
        self._signed = signed

    def headers_to_sign(self, request: AWSRequest) -> HTTPHeaders:
        return self._signed


def _signature(request: Received, auth: Authorization, key: Key, region: str, stamp: str) -> str:
    signed = HTTPHeaders()
    for name in auth.signed_headers:
        for value in request.header(name) or [""]:
            signed[name] = value
    path = request.path  # as sent (devserver.gateway.target_as_sent), as routed
    # The query is compared as API Gateway reads it: each name and value
    # decoded, then encoded the one way SigV4 prescribes.
    pairs = [
        (unquote(name), unquote(value))
        for name, _, value in (piece.partition("=") for piece in request.query.split("&") if piece)
    ]
    # http: botocore hashes the body whatever the request's own
    # X-Amz-Content-Sha256 says (kept out of the headers it reads for that).
    aws = AWSRequest(method=request.method, url=f"http://gateway{path}", data=request.body, params=pairs)
    aws.context["timestamp"] = stamp
    signer = _AsReceived(key, region, signed)
    return signer.signature(signer.string_to_sign(aws, signer.canonical_request(aws)), aws)
