"""How a request is authenticated: no authentication (the dev server, or
ClientAuth=NONE), an API key, or SigV4 (AWS_IAM, and the admin routes).

What can be checked without sending anything is checked when the backend is
made (``prepare``): an auth that is not one, a malformed region, a broken
credential source. HttpBackend and AsyncHttpBackend sign every attempt
afresh (SigV4 dates each one)."""

from __future__ import annotations

import os
import re
from typing import Any, Protocol
from urllib.parse import urlparse

from idblocks.errors import ConfigurationError, MissingCredentials, MissingRegion


class Auth(Protocol):
    """Headers that authenticate one request. An Auth may also have
    ``prepare(endpoint)``, which the backend calls once, to refuse at
    construction what would make every request fail."""

    def headers(self, method: str, url: str, body: bytes | None) -> dict[str, str]: ...


class NoAuth:
    """No authentication: the dev server (`make dev`), or a stack deployed with
    ClientAuth=NONE. The backends' default."""

    def headers(self, method: str, url: str, body: bytes | None) -> dict[str, str]:
        return {}


class ApiKeyAuth:
    """ClientAuth API_KEY: the key in x-api-key."""

    def __init__(self, api_key: str) -> None:
        if not api_key:
            raise ConfigurationError("api_key is empty")
        self._key = api_key

    def headers(self, method: str, url: str, body: bytes | None) -> dict[str, str]:
        return {"x-api-key": self._key}


# The auths computed in place, without I/O (AsyncHttpBackend signs the others
# in a worker thread).
IN_PLACE = (NoAuth, ApiKeyAuth)

NO_CREDENTIALS = (
    "no AWS credentials for SigV4: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
    "(and AWS_SESSION_TOKEN for temporary ones), or AWS_PROFILE to a profile in "
    "~/.aws/config or ~/.aws/credentials, or run where an IAM role provides them (Lambda, ECS, EC2)"
)
NO_REGION = (
    "no AWS region for SigV4: the endpoint is not an execute-api URL that names one; "
    "pass region= (idblocks --region), or set AWS_REGION, AWS_DEFAULT_REGION or the profile's region"
)

# Every AWS region's code: us-east-1, eu-central-2, us-gov-west-1, cn-northwest-1...
_REGION_RE = re.compile(r"[a-z]{2}(?:-[a-z]+)+-[0-9]+")


class IamAuth:
    """ClientAuth AWS_IAM (and the admin routes): SigV4 for execute-api, with
    credentials from botocore's usual chain (environment, profile, role...).

    Raises MissingCredentials at once when the chain finds none; the backend
    raises MissingRegion when it is made if no region is known for its
    endpoint (``region``, else the execute-api host name, else AWS_REGION,
    AWS_DEFAULT_REGION or the profile's region), and ConfigurationError for
    a region that is not a region's code."""

    def __init__(self, region: str | None = None, session: Any = None, *, lazy: bool = False) -> None:
        """``lazy``: look for credentials at the first request, not now.
        Finding them can block on the network (an instance role asks the
        metadata service); AsyncHttpBackend signs in a worker thread, so
        with ``lazy`` nothing of it runs on the event loop. What needs no
        network is checked now all the same: the profile named exists, and
        a key in the environment has its secret."""
        import botocore.session

        self._session = session or botocore.session.get_session()
        self._region = None if region is None else _checked_region(region, "region")
        if lazy:
            self._check_sources()
        else:
            self._credentials()

    def _check_sources(self) -> None:
        from botocore.credentials import EnvProvider
        from botocore.exceptions import BotoCoreError

        try:
            self._session.get_scoped_config()  # the profile named, if any, exists
            EnvProvider().load()  # AWS_ACCESS_KEY_ID, if set, has AWS_SECRET_ACCESS_KEY
        except BotoCoreError as exc:
            raise MissingCredentials(f"{exc}; {NO_CREDENTIALS}") from None

    def _credentials(self) -> Any:
        from botocore.exceptions import BotoCoreError

        try:
            # botocore keeps what it found; refreshable (role) credentials renew themselves
            credentials = self._session.get_credentials()
        except BotoCoreError as exc:  # e.g. AWS_PROFILE names a profile that does not exist
            raise MissingCredentials(f"{exc}; {NO_CREDENTIALS}") from None
        if credentials is None:
            raise MissingCredentials(NO_CREDENTIALS)
        return credentials

    def _region_for(self, url: str) -> str:
        if self._region:
            return self._region
        if region := region_of(url):
            return region
        # botocore itself reads AWS_DEFAULT_REGION and the profile, not AWS_REGION,
        # which Lambda and most AWS tools set
        if region := os.environ.get("AWS_REGION"):
            return _checked_region(region, "AWS_REGION")
        if region := self._session.get_config_variable("region"):
            return _checked_region(region, "AWS_DEFAULT_REGION or the profile's region")
        raise MissingRegion(NO_REGION)

    def prepare(self, endpoint: str) -> None:
        self._region_for(endpoint)

    def headers(self, method: str, url: str, body: bytes | None) -> dict[str, str]:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        credentials = self._credentials()
        region = self._region_for(url)
        request = AWSRequest(
            method=method, url=url, data=body or b"", headers={"Content-Type": "application/json"}
        )
        SigV4Auth(credentials.get_frozen_credentials(), "execute-api", region).add_auth(request)
        return dict(request.headers.items())


# An API's own host name, which names its region: <api-id>.execute-api.<region>.amazonaws.com,
# and a private API's through one of its VPC endpoints, <api-id>-<vpce-id>.execute-api...
# (API Gateway developer guide, "Invoke a private API"); .amazonaws.com.cn in China.
_EXECUTE_API_HOST = re.compile(
    r"[a-z0-9]+(?:-vpce-[0-9a-f]+)?\.execute-api\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?"
)


def region_of(url: str) -> str | None:
    """The region an execute-api URL names (None for any other URL)."""
    match = _EXECUTE_API_HOST.fullmatch(urlparse(url).hostname or "")
    return match.group(1) if match else None


def _checked_region(region: object, source: str) -> str:
    if not isinstance(region, str) or not _REGION_RE.fullmatch(region):
        raise ConfigurationError(
            f"{source} {region!r} is not an AWS region's code (such as eu-west-1 or us-gov-west-1)"
        )
    return region


_EXAMPLES = {"NoAuth": "NoAuth()", "ApiKeyAuth": "ApiKeyAuth(api_key)", "IamAuth": "IamAuth()"}
_AUTHS = "NoAuth() (no authentication), ApiKeyAuth(api_key) or IamAuth() (SigV4)"


def checked_auth(auth: object) -> Auth:
    """``auth`` if it is an Auth (None: NoAuth()), prepared for ``endpoint``
    by the caller; else a ConfigurationError that says what to pass."""
    if auth is None:
        return NoAuth()
    if isinstance(auth, type):
        name = auth.__name__
        example = _EXAMPLES.get(name, f"{name}(...)")
        raise ConfigurationError(f"auth={name} is the class {name}: pass an instance, {example}")
    if isinstance(auth, str):
        raise ConfigurationError(f"auth={auth!r} is a string: pass an instance, {_AUTHS}")
    if not callable(getattr(auth, "headers", None)):
        raise ConfigurationError(
            f"auth={auth!r} has no headers(method, url, body): pass an instance, {_AUTHS}"
        )
    return auth  # type: ignore[return-value]  # checked above, as far as a Protocol can be
