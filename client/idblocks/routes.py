"""Where requests go: the API's base URL, checked once when a backend is
made, and the path of each route, with the counter name checked against
the service's rule before anything is sent."""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import quote, urlencode, urlsplit

from idblocks.errors import ConfigurationError, InvalidName

# A host name's label: letters, digits and hyphens, not at either end (and
# underscores, which container and service names use).
_LABEL_RE = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")


def endpoint_of(endpoint: object) -> str:
    """The API's base URL, checked, without a trailing slash: http(s), a
    host that is an IP address or a well-formed name, a port from 1 to
    65535 if one is given, and no query, fragment or credentials (the
    routes' paths are appended to it). Else ConfigurationError, naming
    what is wrong: such an endpoint would make every request fail, and
    retrying it would only look like an outage."""
    if not isinstance(endpoint, str):
        raise ConfigurationError(f"endpoint must be an http(s) URL, not {endpoint!r}")
    url = urlsplit(endpoint)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise ConfigurationError(f"endpoint must be an http(s) URL, not {endpoint!r}")
    try:
        port = url.port
    except ValueError as exc:  # "Port out of range 0-65535", "Port could not be cast..."
        raise ConfigurationError(f"endpoint {endpoint!r} has no valid port: {exc}") from None
    if port == 0:
        raise ConfigurationError(f"endpoint {endpoint!r} has no valid port: 0")
    if url.username is not None or url.password is not None:
        raise ConfigurationError(f"endpoint {endpoint!r} carries a user name: pass credentials as auth=")
    if url.query or url.fragment or endpoint.rstrip("/").endswith(("?", "#")):
        raise ConfigurationError(
            f"endpoint {endpoint!r} has a query or a fragment: it must be the API's base URL (with its stage)"
        )
    _check_host(url.hostname, endpoint)
    return endpoint.rstrip("/")


def _check_host(host: str, endpoint: str) -> None:
    try:
        ipaddress.ip_address(host)
        return
    except ValueError:
        pass
    name = host[:-1] if host.endswith(".") else host  # a fully qualified name's root
    labels = name.split(".")
    if "" in labels:
        raise ConfigurationError(f"endpoint {endpoint!r} has a host name with an empty label: {host!r}")
    try:
        ascii_labels = [label.encode("idna").decode("ascii") for label in labels]
    except UnicodeError:
        ascii_labels = []
    if (
        not ascii_labels
        or len(".".join(ascii_labels)) > 253
        or not all(_LABEL_RE.fullmatch(label) for label in ascii_labels)
    ):
        raise ConfigurationError(f"endpoint {endpoint!r} has a malformed host name: {host!r}")


# The service's counter name rule (NAME_PATTERN in the service's rules.py),
# repeated here so that a name it refuses is refused before anything is sent:
# "." and ".." above all, which URL handling would collapse into another path
# (/counters/./batch is /counters/batch).
_NAME_RE = re.compile(
    r"(?:[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}|\.[A-Za-z0-9_-][A-Za-z0-9_.-]{0,126}|\.\.[A-Za-z0-9_.-]{1,126})"
)


def check_name(name: object) -> str:
    """Return ``name`` if the service accepts it as a counter name: 1-128
    characters of A-Z a-z 0-9 _ . -, and not "." or "..". Else raise
    InvalidName (an InvalidRequest and a ValueError)."""
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise InvalidName(
            f"counter name must be 1-128 characters of A-Z, a-z, 0-9, '_', '.' or '-', "
            f"and not '.' or '..', not {name!r}"
        )
    return name


def counter_path(name: str, route: str) -> str:
    """/counters/{name}/{route}: the block routes, next and batch."""
    return f"/counters/{quote(check_name(name), safe='')}/{route}"


def admin_path(name: str | None = None, **query: object) -> str:
    """/admin/counters, or /admin/counters/{name}; with the query given (None values left out)."""
    path = "/admin/counters" if name is None else f"/admin/counters/{quote(check_name(name), safe='')}"
    present = {key: value for key, value in query.items() if value is not None}
    return path + (f"?{urlencode(present)}" if present else "")
