"""Talking to the idblocks API over HTTP.

``HttpBackend`` covers every route. Block requests (next, batch) always carry
an Idempotency-Key, kept across the retries of one request, so a retry after
a lost response gets the block that was already taken instead of a second
one. Throttling, 5xx and network errors are retried with jittered backoff
(RetryPolicy); everything else is raised as the matching ServiceError.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote, urlencode, urlparse

import urllib3
from urllib3.exceptions import ConnectTimeoutError, HTTPError, NewConnectionError

from idblocks.errors import ServiceUnavailable, error_for
from idblocks.retry import RETRY_STATUSES, RetryPolicy, parse_retry_after

USER_AGENT = "idblocks-client/0.1"


@dataclass(frozen=True)
class Block:
    """IDs ``start`` to ``end``, both included."""

    start: int
    end: int

    def __len__(self) -> int:
        return self.end - self.start + 1

    def ids(self) -> range:
        return range(self.start, self.end + 1)


class Backend(Protocol):
    """What a Sequence needs: one call that hands out a block."""

    def allocate(self, counter: str, count: int, *, idempotency_key: str) -> Block: ...


# -- authentication ------------------------------------------------------------


class Auth(Protocol):
    def headers(self, method: str, url: str, body: bytes | None) -> dict[str, str]: ...


class NoAuth:
    def headers(self, method: str, url: str, body: bytes | None) -> dict[str, str]:
        return {}


class ApiKeyAuth:
    """ClientAuth API_KEY: the key in x-api-key."""

    def __init__(self, api_key: str) -> None:
        if not api_key:
            raise ValueError("api_key is empty")
        self._key = api_key

    def headers(self, method: str, url: str, body: bytes | None) -> dict[str, str]:
        return {"x-api-key": self._key}


class IamAuth:
    """ClientAuth AWS_IAM (and the admin routes): SigV4 for execute-api, with
    credentials from botocore's usual chain (environment, profile, role...)."""

    def __init__(self, region: str | None = None, session: Any = None) -> None:
        import botocore.session

        self._session = session or botocore.session.get_session()
        self._region = region

    def headers(self, method: str, url: str, body: bytes | None) -> dict[str, str]:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        credentials = self._session.get_credentials()
        if credentials is None:
            raise ValueError("no AWS credentials found for SigV4 (see botocore's credential chain)")
        region = self._region or _region_of(url) or self._session.get_config_variable("region")
        if not region:
            raise ValueError("no AWS region for SigV4: pass region= or set AWS_REGION")
        request = AWSRequest(
            method=method, url=url, data=body or b"", headers={"Content-Type": "application/json"}
        )
        SigV4Auth(credentials.get_frozen_credentials(), "execute-api", region).add_auth(request)
        return dict(request.headers.items())


def _region_of(url: str) -> str | None:
    match = re.match(r"^[a-z0-9]+\.execute-api\.([a-z0-9-]+)\.amazonaws\.com", urlparse(url).hostname or "")
    return match.group(1) if match else None


# -- the API -------------------------------------------------------------------


class HttpBackend:
    def __init__(
        self,
        endpoint: str,
        *,
        auth: Auth | None = None,
        timeout: float = 10.0,
        retry: RetryPolicy | None = None,
        pool_size: int = 10,
    ) -> None:
        url = urlparse(endpoint)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"endpoint must be an http(s) URL, not {endpoint!r}")
        self.endpoint = endpoint.rstrip("/")
        self.auth = auth or NoAuth()
        self.retry = retry or RetryPolicy()
        self._http = urllib3.PoolManager(
            maxsize=pool_size, retries=False, timeout=urllib3.Timeout(connect=min(timeout, 5.0), read=timeout)
        )

    # block requests ------------------------------------------------------

    def allocate(self, counter: str, count: int, *, idempotency_key: str | None = None) -> Block:
        """POST /counters/{counter}/batch. Safe to call again with the same key."""
        body = self.request(
            "POST",
            f"/counters/{_name(counter)}/batch",
            {"count": count},
            idempotency_key=idempotency_key or new_key(),
        )
        return Block(body["start"], body["end"])

    def next(self, counter: str, *, idempotency_key: str | None = None) -> int:
        body = self.request(
            "POST", f"/counters/{_name(counter)}/next", idempotency_key=idempotency_key or new_key()
        )
        return body["id"]

    # administration ------------------------------------------------------

    def create(self, name: str, *, start: int | None = None, max_id: int | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"name": name}
        if start is not None:
            body["start"] = start
        if max_id is not None:
            body["max"] = max_id
        return self.request("POST", "/admin/counters", body, retry_unknown_outcome=False)

    def get(self, name: str) -> dict[str, Any]:
        return self.request("GET", f"/admin/counters/{_name(name)}")

    def list(self, *, limit: int | None = None, cursor: str | None = None) -> dict[str, Any]:
        query = {k: v for k, v in (("limit", limit), ("cursor", cursor)) if v is not None}
        return self.request("GET", "/admin/counters" + (f"?{urlencode(query)}" if query else ""))

    def set_next(self, name: str, next_id: int) -> dict[str, Any]:
        # Raise-only, so repeating it is harmless.
        return self.request("PUT", f"/admin/counters/{_name(name)}", {"next": next_id})

    def delete(self, name: str) -> None:
        self.request("DELETE", f"/admin/counters/{_name(name)}", retry_unknown_outcome=False)

    # the one place requests are made ----------------------------------------

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        idempotency_key: str | None = None,
        retry_unknown_outcome: bool = True,
    ) -> Any:
        """Send, retrying what can be retried; return the JSON body or raise.

        A network error after the request went out leaves its outcome unknown;
        it is retried only when repeating is harmless (reads, raise-only
        writes, and anything with an Idempotency-Key)."""
        url = self.endpoint + path
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if idempotency_key is not None:
            headers["Idempotency-Key"] = idempotency_key
        policy = self.retry
        started = policy.clock()
        failure = "no attempt made"
        for attempt in range(policy.attempts):
            retry_after = None
            try:
                signed = {**headers, **self.auth.headers(method, url, data)}
                response = self._http.request(method, url, body=data, headers=signed, redirect=False)
            except (NewConnectionError, ConnectTimeoutError) as exc:
                failure = f"cannot connect to {self.endpoint}: {exc}"  # never sent: always safe to retry
            except HTTPError as exc:
                failure = f"{type(exc).__name__} talking to {self.endpoint}: {exc}"
                if not retry_unknown_outcome:
                    raise ServiceUnavailable(failure + " (the request may have been applied)") from exc
            else:
                if response.status < 300:
                    return json.loads(response.data) if response.data else None
                code, message = _error_of(response)
                if not _retryable(response.status, code):
                    raise error_for(response.status, code, message)
                failure = f"{code}: {message} (HTTP {response.status})"
                retry_after = parse_retry_after(response.headers.get("Retry-After"))
            if attempt + 1 == policy.attempts:
                break
            wait = policy.delay(attempt + 1, retry_after)
            if policy.clock() - started + wait > policy.deadline:
                break
            policy.sleep(wait)
        raise ServiceUnavailable(f"{method} {path} failed after {attempt + 1} attempt(s): {failure}")

    def close(self) -> None:
        self._http.clear()


def _retryable(status: int, code: str) -> bool:
    # 409 request_in_progress: the same request (same Idempotency-Key) is still
    # running; asking again soon gets its answer.
    return status in RETRY_STATUSES or (status == 409 and code == "request_in_progress")


def new_key() -> str:
    return uuid.uuid4().hex


def _name(name: str) -> str:
    return quote(name, safe="")


def _error_of(response: Any) -> tuple[str, str]:
    try:
        body = json.loads(response.data)
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        error = body["error"]
        return str(error.get("code", "error")), str(error.get("message", ""))
    # API Gateway's own errors (auth, throttling, unknown route) look like {"message": "..."}
    message = body.get("message") if isinstance(body, dict) else None
    return f"http_{response.status}", str(message or response.data[:200].decode(errors="replace"))
