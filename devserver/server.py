"""The API of template.yaml, served locally the way `sam local start-api`
serves it, with the functions run in this process instead of in containers.

Routing and API Gateway events come from SAM CLI itself: its stack and API
providers read the template, and its LocalApigwService (a Flask app) matches
requests and builds the proxy events. Where SAM CLI would start a container
through its LocalLambdaRunner, InProcessRunner calls the real handler. None of
this is public SAM CLI API: aws-sam-cli is pinned, and
tests/integration/test_devserver_sam_contract.py fails if an upgrade moves what is used.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import logging
import re
import socket
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote_to_bytes

from flask import Response, g, request
from samcli.lib.providers.api_provider import ApiProvider
from samcli.lib.providers.provider import Api
from samcli.lib.providers.sam_stack_provider import SamLocalStackProvider
from samcli.lib.utils.stream_writer import StreamWriter
from samcli.local.apigw import local_apigw_service
from samcli.local.apigw.local_apigw_service import LocalApigwService
from samcli.local.apigw.path_converter import PathConverter
from samcli.local.lambdafn.exceptions import FunctionNotFound
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

from devserver.gateway import Denied, Gateway, Stamp, received_from, target_as_sent
from devserver.sigv4 import ERROR_TYPES, Refused
from localrun.invoke import LocalContext, load_handler
from localrun.template import ROOT, FunctionSpec, default_template, parsed_template

log = logging.getLogger("devserver")
# As every answer of the API's (idblocks_core.api.gateway).
ANSWER_HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}


class FunctionTimedOut(Exception):
    """A handler that ran its whole Timeout: Lambda stops it, and the
    invocation fails (API Gateway's 502; SAM CLI's stand-in answers 500)
    instead of answering whatever the handler would have returned."""


class InProcessRunner:
    """What LocalApigwService needs of a Lambda runner: ``invoke`` and
    ``is_debugging``. Requests are run one at a time, as one warm container
    would run them: the handlers keep per-invocation state on module objects
    (Powertools' metric set, the logger's correlation id), which concurrent
    threads would mix up. ``after_invoke`` runs before the response leaves.

    Powertools prints metrics to stdout as CloudWatch EMF lines, which in AWS
    become metrics; here they are dropped unless ``show_metrics``."""

    def __init__(
        self,
        functions: dict[str, FunctionSpec],
        after_invoke: Callable[[], None] | None = None,
        timeout_seconds: float | None = None,
        show_metrics: bool = False,
    ) -> None:
        self.functions = functions
        self.show_metrics = show_metrics
        self.after_invoke = after_invoke
        self.timeout_seconds = timeout_seconds
        self._lock = threading.Lock()

    def is_debugging(self) -> bool:
        return False

    def preload(self) -> None:
        for spec in self.functions.values():
            load_handler(spec)

    def invoke(
        self,
        function_identifier: str,
        event: str,
        stdout: StreamWriter | None = None,
        stderr: StreamWriter | None = None,
        **_: Any,
    ) -> None:
        spec = self.functions.get(function_identifier)
        if spec is None:
            raise FunctionNotFound(f"no function {function_identifier} in template.yaml")
        with self._lock:
            g.function = function_identifier
            printed = io.StringIO()
            timeout = self.timeout_seconds or spec.timeout_seconds
            try:
                with contextlib.redirect_stdout(printed):
                    handler = load_handler(spec)  # the init, which Lambda times apart
                    context = LocalContext(spec.logical_id, timeout)
                    result = handler(json.loads(event), context)
                if context.get_remaining_time_in_millis() == 0:
                    # Lambda would have stopped it: its answer never reaches
                    # the caller, and the invocation is a failure.
                    raise FunctionTimedOut(f"Task timed out after {timeout:.2f} seconds")
                output = json.dumps(result)
            except Exception as exc:  # noqa: BLE001 - whatever a handler raises, Lambda reports it so (502)
                trace = traceback.format_exception(exc)
                if stderr is not None:
                    stderr.write_str("".join(trace))
                output = json.dumps(
                    {"errorMessage": str(exc), "errorType": type(exc).__name__, "stackTrace": trace}
                )
            finally:
                if self.show_metrics and printed.getvalue():
                    sys.stdout.write(printed.getvalue())
                if self.after_invoke is not None:
                    self.after_invoke()
        if stdout is not None:
            stdout.write_str(output)


class GatewayService(LocalApigwService):
    """SAM CLI's service, whose events get what API Gateway gives each
    request: its ids, its time, the caller it authenticated (SAM CLI gives
    every request of a server the same requestId and time)."""

    def _generate_lambda_event(self, flask_request: Any, route: Any, method: str, endpoint: str) -> dict:
        event = super()._generate_lambda_event(flask_request, route, method, endpoint)
        stamp = g.get("stamp")
        return event if stamp is None else stamp.stamp(event, g.get("identity", {}))


def quiet_function_logs(service: str) -> None:
    """Keep the functions' INFO records (one allocation record of ~700 bytes
    per request) off the console; warnings and errors still show. The
    console's line per request says who was answered what."""
    logging.getLogger(service).addFilter(lambda record: record.levelno >= logging.WARNING)
    # Powertools' note on a request that failed before any metric was added.
    warnings.filterwarnings("ignore", message="No application metrics to publish", category=UserWarning)


def load_api(template_path: Path, parameter_overrides: dict[str, str]) -> Api:
    """The API as `sam local start-api` reads it from the template, parsed
    as SAM CLI parses it (parsed_template: once for each text of it)."""
    stacks, _ = SamLocalStackProvider.get_stacks(
        template_dictionary=parsed_template(template_path),
        parameter_overrides=parameter_overrides,
        language_extensions_enabled=True,
    )
    return ApiProvider(stacks, cwd=str(ROOT)).api


# API Gateway's status for a response type whose GatewayResponse sets none
# (its "Gateway response types" page).
_GATEWAY_STATUS = dict.fromkeys(
    (
        "MISSING_AUTHENTICATION_TOKEN",
        "INVALID_SIGNATURE",
        "EXPIRED_TOKEN",
        "ACCESS_DENIED",
        "INVALID_API_KEY",
    ),
    403,
)


@functools.cache
def gateway_answer(kind: str) -> tuple[int, dict[str, Any], dict[str, str]]:
    """API Gateway's own answer of one response type, as template.yaml's
    GatewayResponses word it, so the dev server cannot drift from it: its
    status, body and headers, read once per kind and shared, so never
    changed in place (refusal() makes each request a response of its own,
    as requests run in threads)."""
    spec = default_template().raw["Resources"]["Api"]["Properties"]["GatewayResponses"][kind]
    # Parsed here: a template with $context variables would need API Gateway to fill it.
    body = json.loads(spec["ResponseTemplates"]["application/json"])
    headers = {name: value.strip("'") for name, value in spec["ResponseParameters"]["Headers"].items()}
    status = int(spec.get("StatusCode", _GATEWAY_STATUS[kind]))
    return status, body, headers


def refusal(kind: str, message: str, error_type: str) -> Response:
    """API Gateway's answer of response type ``kind`` (its status, code and
    headers, as template.yaml words them), with ``message``: the reason,
    and what to do about it here."""
    status, body, headers = gateway_answer(kind)
    worded = body | {"error": body["error"] | {"message": message}}
    answer = Response(json.dumps(worded), status=status, mimetype="application/json", headers=headers)
    answer.headers["x-amzn-ErrorType"] = error_type
    return answer


def printable(text: str) -> str:
    """``text`` with every character that is not printable (control
    characters, line and paragraph separators) and the backslash escaped as
    Python escapes them: a request's decoded path cannot start a forged log
    line (%0A) or write a NUL (%00) into the log."""
    return "".join(
        char if char.isprintable() and char != "\\" else char.encode("unicode_escape").decode("ascii")
        for char in text
    )


def unknown_route(api: Api, method: str, path: str) -> Response:
    """API Gateway's answer to an unknown route, worded for the dev server:
    which methods the path takes, if it is a route's."""
    routes = [route for route in api.routes if _matches(route.path, path)]
    takes = sorted({other for route in routes for other in route.methods} - {method})
    hint = f"{routes[0].path} takes {' or '.join(takes)}" if takes else "see the routes it printed at start"
    message = (
        f"no route {method} {path} on this dev server: {hint}, or /openapi.json "
        "(a deployed API answers this 403 to an unsigned request too)"
    )
    return refusal("MISSING_AUTHENTICATION_TOKEN", message, ERROR_TYPES["MISSING_AUTHENTICATION_TOKEN"])


def _matches(template: str, path: str) -> bool:
    pattern = re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(template))
    return re.fullmatch(pattern, path.rstrip("/") or "/") is not None


def _route_as_sent(wsgi_app: Callable[..., Any]) -> Callable[..., Any]:
    """Route the path as sent (target_as_sent), the one signed and
    evaluated: werkzeug reads "//host/x" as a host and the path /x, and
    decodes an encoded slash (%2F) into a separator. An encoded slash is
    data in its segment (RFC 3986), so /counters/orders%2F2024/next reaches
    next with the name orders%2F2024, which the function refuses as
    invalid_name."""

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        path, query = target_as_sent(environ)
        pieces = re.split("%2f", path, flags=re.IGNORECASE)
        # WSGI's PATH_INFO: decoded, its bytes as latin-1 (PEP 3333).
        environ["PATH_INFO"] = "%2F".join(unquote_to_bytes(piece).decode("latin-1") for piece in pieces)
        environ["QUERY_STRING"] = query
        return wsgi_app(environ, start_response)

    return app


def _path_shown() -> str:
    """The path as sent, decoded, for the log and the messages. Flask's
    request.path drops a leading "//" (werkzeug strips the leading slashes
    before routing, so "//counters/x/next" would match next's route)."""
    return request.environ.get("PATH_INFO", "").encode("latin-1").decode("utf-8", "replace")


class _DropEmptyBodyWarning(logging.Filter):
    """SAM CLI warns of every answer without a body; a 204 has none by definition."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "Lambda returned empty body!"


_EMPTY_BODY = _DropEmptyBodyWarning()


def create_app(
    api: Api, runner: InProcessRunner, openapi: dict[str, Any], gateway: Gateway | None = None
) -> Any:
    """SAM CLI's Flask app for the API, with API Gateway's authentication
    and request ids (``gateway``; none: authentication off), /openapi.json
    and a log line per request."""
    gateway = gateway or Gateway()
    service = GatewayService(api=api, lambda_runner=runner, stderr=StreamWriter(sys.stderr))
    service.create()
    app = service._app
    app.wsgi_app = _route_as_sent(app.wsgi_app)
    logging.getLogger(local_apigw_service.__name__).addFilter(_EMPTY_BODY)
    document = json.dumps(openapi, indent=2)

    def openapi_json() -> Response:
        return Response(document, mimetype="application/json")

    app.add_url_rule("/openapi.json", endpoint="openapi", view_func=openapi_json, methods=["GET"])

    # An unknown path or method: in AWS, API Gateway answers before any
    # function runs; SAM CLI's stand-in has the old untyped body and no
    # Cache-Control.
    for status in (404, 405):
        app.register_error_handler(status, lambda _: unknown_route(api, request.method, _path_shown()))

    @app.before_request
    def _start_clock() -> Response | None:
        g.started = time.perf_counter()
        g.stamp = Stamp.now()
        if "//" in _path_shown():
            # An empty segment: no route of the API has one, so the path
            # names none (werkzeug would have matched it slashes merged).
            return unknown_route(api, request.method, _path_shown())
        if request.url_rule is not None:  # a route: API Gateway authenticates before anything else
            received = received_from(
                request.environ, list(request.headers.items()), request.get_data(cache=True)
            )
            resource = PathConverter.convert_path_to_api_gateway(request.url_rule.rule)
            try:
                g.identity = gateway.authenticate(request.method, resource, received)
            except Denied as denied:
                log.info("%s", printable(denied.console()))
                return refusal(denied.kind, denied.reason, denied.error_type)
            except Refused as refused:
                return refusal(refused.kind, refused.reason, refused.error_type)
        # SAM CLI answers a body that is not UTF-8 with a 502 of its own, before
        # any function runs; the API's answer to such a body is a 400.
        try:
            request.get_data(cache=True).decode("utf-8")
        except UnicodeDecodeError:
            body = {"error": {"code": "invalid_body", "message": "request body is not UTF-8 text"}}
            return Response(json.dumps(body), status=400, mimetype="application/json", headers=ANSWER_HEADERS)
        return None

    @app.after_request
    def _log(response: Response) -> Response:
        took = (time.perf_counter() - g.get("started", time.perf_counter())) * 1000
        target = g.get("function", "-")
        path = f"{_path_shown()}?{request.environ.get('QUERY_STRING', '')}".rstrip("?")
        stamp = g.get("stamp") or Stamp.now()
        # As API Gateway names every answer, its own refusals included.
        response.headers["x-amzn-RequestId"] = stamp.request_id
        response.headers["x-amz-apigw-id"] = stamp.extended_request_id
        log.info(
            "%s %s -> %s %d (%.1f ms) %s",
            printable(request.method),
            printable(path),
            target,
            response.status_code,
            took,
            stamp.request_id,
        )
        return response

    return app


# How often serve_forever looks whether a stop was asked for: the stop waits
# for that look, half a second at socketserver's default, which every start
# and stop of a dev server (hundreds in the test suites) waited out.
SHUTDOWN_POLL_SECONDS = 0.05


def serve(app: Any, host: str, port: int) -> BaseWSGIServer:
    """Bind and return the server (call ``serve_forever`` on it). Raises
    OSError if the address cannot be had: werkzeug would print its own
    advice and exit instead, so the address is tried here first."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind((host, port))
    return make_server(host, port, app, threaded=True, request_handler=_TargetAsSent)


class _TargetAsSent(WSGIRequestHandler):
    """werkzeug's handler, with the request line's target as sent in
    RAW_URI: Python's http.server reduces a target that starts with "//" to
    one "/" before werkzeug sees it (against open redirects in file
    servers), so "//counters/x/next" would reach next's route."""

    def make_environ(self) -> dict[str, Any]:
        environ = super().make_environ()
        words = self.requestline.split()
        if len(words) == 3:  # METHOD target HTTP/x.y, read as latin-1 like every WSGI string
            environ["RAW_URI"] = environ["REQUEST_URI"] = words[1]
        return environ
