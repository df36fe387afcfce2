"""An environment in which botocore finds no AWS credentials: no variables,
no files, and no instance metadata service to ask (which would otherwise be
tried over the network)."""

from __future__ import annotations

from pathlib import Path

import pytest

CREDENTIAL_VARIABLES = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
)


def without_aws_credentials(monkeypatch: pytest.MonkeyPatch, empty_dir: Path) -> None:
    for var in CREDENTIAL_VARIABLES:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(empty_dir / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(empty_dir / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def credentials_without_region(monkeypatch: pytest.MonkeyPatch) -> None:
    """Credentials botocore finds, but no region anywhere it looks."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    for var in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
