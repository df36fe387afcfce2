"""Invoke the functions in-process with the events of events/*.json, routed
by template.yaml's own Api events (so a route the template does not declare
cannot pass a test)."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from localrun.invoke import LocalContext, load_handler
from localrun.template import ROOT, Template

EVENTS = ROOT / "events"
_UNSET: Any = object()


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: Any
    raw: dict[str, Any] = field(repr=False)

    @property
    def error_code(self) -> str | None:
        if isinstance(self.body, dict) and isinstance(self.body.get("error"), dict):
            return self.body["error"].get("code")
        return None


def load_event(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / f"{name}.json").read_text())


def routes(template: Template) -> dict[tuple[str, str], str]:
    """(METHOD, /path/{param}) -> function logical id, from the template."""
    table = {}
    for logical_id, resource in template.of_type("AWS::Serverless::Function").items():
        for event in resource["Properties"].get("Events", {}).values():
            if event["Type"] == "Api":
                key = (event["Properties"]["Method"].upper(), event["Properties"]["Path"])
                assert key not in table, f"route {key} declared twice"
                table[key] = logical_id
    return table


class LocalApi:
    def __init__(self, template: Template) -> None:
        self.template = template
        self.routes = routes(template)
        self.functions = template.functions

    def call(
        self,
        event_name: str,
        *,
        name: str = _UNSET,
        body: Any = _UNSET,
        raw_body: str | None = _UNSET,
        headers: dict[str, str] | None = None,
        query: dict[str, str] | None = _UNSET,
        identity: dict[str, Any] | None = None,
    ) -> Reply:
        """Send events/<event_name>.json, changed as asked: ``name`` replaces
        the {name} path parameter, ``body`` is sent as JSON and ``raw_body``
        as is (None: no body), ``headers`` are added, ``identity`` merged
        into requestContext.identity."""
        event = load_event(event_name)
        if name is not _UNSET:
            event["pathParameters"] = {"name": name}
            # as API Gateway would see it: the path keeps the name URL-encoded
            event["path"] = event["resource"].replace("{name}", quote(name, safe=""))
        if body is not _UNSET:
            event["body"] = json.dumps(body)
        if raw_body is not _UNSET:
            event["body"] = raw_body
        if query is not _UNSET:
            event["queryStringParameters"] = query
            event["multiValueQueryStringParameters"] = {k: [v] for k, v in query.items()} if query else None
        for key, value in (headers or {}).items():
            event["headers"][key] = value
            event["multiValueHeaders"][key] = [value]
        if identity:
            event["requestContext"]["identity"].update(identity)
        return self.send(event)

    def send(self, event: dict[str, Any]) -> Reply:
        logical_id = self.routes[(event["httpMethod"], event["resource"])]
        spec = self.functions[logical_id]
        raw = load_handler(spec)(copy.deepcopy(event), LocalContext(logical_id, spec.timeout_seconds))
        headers = {k: v[-1] for k, v in (raw.get("multiValueHeaders") or {}).items()}
        headers.update(raw.get("headers") or {})
        body = raw.get("body")
        return Reply(raw["statusCode"], headers, json.loads(body) if body else None, raw)


def event_files() -> list[Path]:
    return sorted(EVENTS.glob("*.json"))
