"""Signs each request of an httpx client with AWS Signature Version 4
(ClientAuth AWS_IAM, and the admin routes), as API Gateway checks it. For a
client openapi-python-client generated from docs/openapi.json:

    import botocore.session
    from idblocks_client import Client

    credentials = botocore.session.get_session().get_credentials()
    client = Client(
        base_url="https://abcde12345.execute-api.eu-west-1.amazonaws.com/v1",
        httpx_args={"auth": SigV4(credentials, "eu-west-1")},
    )

The request is signed as it will be sent: its method, its URL's path (the
stage included) and query, its body, Host, Content-Type and Idempotency-Key.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import httpx
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest

# Headers a hop may rewrite (Connection, Accept-Encoding...) are left unsigned;
# botocore adds Host from the URL.
SIGNED_HEADERS = ("content-type", "idempotency-key")


class SigV4(httpx.Auth):
    requires_request_body = True

    def __init__(self, credentials: Any, region: str) -> None:
        """``credentials``: botocore's (a session's get_credentials()); role
        credentials renew themselves."""
        self.credentials = credentials
        self.region = region

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response]:
        headers = {name: request.headers[name] for name in SIGNED_HEADERS if name in request.headers}
        signed = AWSRequest(
            method=request.method, url=str(request.url), data=request.content, headers=headers
        )
        SigV4Auth(self.credentials.get_frozen_credentials(), "execute-api", self.region).add_auth(signed)
        # Authorization, X-Amz-Date and, for temporary credentials, X-Amz-Security-Token
        request.headers.update({name: value for name, value in signed.headers.items() if name not in headers})
        yield request
