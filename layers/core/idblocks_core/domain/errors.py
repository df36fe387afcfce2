"""Domain errors, and the catalogue of every error code the API answers.

Each error carries a stable machine-readable ``code``. ``ERROR_CODES`` says,
for each code, its HTTP status, what it means, whether a retry can help and
what the caller should do; ``idblocks_core.api.gateway`` takes statuses from it,
docs/errors.md and the OpenAPI document are checked against it
(tests/infra/test_error_catalogue.py), and template.yaml's GatewayResponses answer
with its gateway codes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# Who answers with a code: the functions (our code), or API Gateway itself
# before any function runs (template.yaml's GatewayResponses).
Source = Literal["function", "gateway", "both"]


@dataclass(frozen=True)
class ErrorCode:
    code: str
    status: int | Literal["4xx", "5xx"]  # a class: API Gateway's own status within it
    meaning: str
    retry: Literal["no", "yes", "after Retry-After"]
    action: str
    source: Source = "function"


_NOT_CHANGED = "Nothing was changed."


def _bad_field(field: str, rule: str) -> ErrorCode:
    return ErrorCode(
        f"invalid_{field.lower().replace('-', '_')}",
        400,
        f"{field} is missing or breaks its rule: {rule}. {_NOT_CHANGED}",
        "no",
        f"Correct {field}: the message names the rule it broke.",
    )


_CATALOGUE = (
    # -- bad input: 400, nothing changed ------------------------------------
    _bad_field("name", "1-128 characters of A-Z a-z 0-9 _ . -, not '.' or '..'"),
    _bad_field("count", "an integer from 1 to the deployment's MaxBatchSize"),
    _bad_field("start", "an integer from 1 to 2^63-1, not above max"),
    _bad_field("max", "an integer from 1 to 2^63-1"),
    _bad_field("next", "an integer from 1 to 2^63 (max + 1 exhausts the counter)"),
    _bad_field("cache", "an integer from 1 to 1,000,000"),
    _bad_field("limit", "an integer from 1 to 1000"),
    _bad_field("deleted", "true or false"),
    _bad_field("Idempotency-Key", "1-128 printable ASCII characters without spaces"),
    ErrorCode(
        "invalid_cursor",
        400,
        f"The cursor is not one this API returned (or was altered). {_NOT_CHANGED}",
        "no",
        "Pass the cursor of the previous page as it came, or start again without one.",
    ),
    ErrorCode(
        "invalid_json",
        400,
        f"The body is not valid JSON. {_NOT_CHANGED}",
        "no",
        "Send a JSON object.",
    ),
    ErrorCode(
        "invalid_body",
        400,
        "The body is not a JSON object of this route's fields: missing, not an object, an unknown "
        "field, a PUT with neither next nor cache, nested too deep, or not UTF-8 (a number out of a "
        f"field's range is that field's code, e.g. invalid_count). {_NOT_CHANGED}",
        "no",
        "Send only the fields the route takes (see the OpenAPI document).",
    ),
    # -- routing ------------------------------------------------------------
    ErrorCode(
        "unknown_route_or_unsigned",
        403,
        "API Gateway found no route for this method and path, or the route needs SigV4 (AWS_IAM) "
        "and the request was not signed: API Gateway reports both the same way.",
        "no",
        "Check the method and the path (the stage is the first segment), and sign the request "
        "(the client's IamAuth).",
        "gateway",
    ),
    ErrorCode(
        "route_not_found",
        404,
        "A function was reached with a path it does not serve (e.g. an empty counter name).",
        "no",
        "Check the method and the path.",
    ),
    ErrorCode(
        "method_not_allowed",
        405,
        "GET /counters/{name}/next is switched off in this deployment.",
        "no",
        "Use POST.",
    ),
    ErrorCode(
        "foreign_event",
        403,
        "A function was invoked with an event that did not come through this deployment's API "
        "stage (another stage, or an event written by hand and sent to Lambda directly); it is "
        f"logged. {_NOT_CHANGED}",
        "no",
        "Call the API's URL: only API Gateway invokes the functions.",
    ),
    # -- auth (API Gateway) --------------------------------------------------
    ErrorCode(
        "invalid_signature",
        403,
        "The SigV4 signature does not match the request (wrong secret key, or the request was "
        "changed after signing, or the clock is off by more than 5 minutes).",
        "no",
        "Sign with valid credentials after the request is final; check the clock.",
        "gateway",
    ),
    ErrorCode(
        "expired_token",
        403,
        "The credentials the request was signed with have expired.",
        "no",
        "Refresh the credentials (a new session token) and send again.",
        "gateway",
    ),
    ErrorCode(
        "access_denied",
        403,
        "The caller's IAM policy does not allow execute-api:Invoke on this route (or on this counter: a "
        "client policy may name only some counters), or the API's resource policy refuses it: a caller "
        "of an account the stack does not let in (CallerOrganizationId, CallerAccounts), an admin route "
        "called from another account, a private API called through an endpoint VpcEndpointIds does not "
        "list.",
        "no",
        "Attach the stack's ClientPolicyArn (next, batch) or AdminPolicyArn policy to the caller's role, "
        "or grant execute-api:Invoke on the route's ARN; nothing on Lambda is needed. From another "
        "account: deploy with it in CallerOrganizationId or CallerAccounts, and attach the CallerPolicy "
        "output's policy in that account. A private API: call it through an endpoint VpcEndpointIds lists.",
        "gateway",
    ),
    ErrorCode(
        "invalid_api_key",
        403,
        "ClientAuth API_KEY: the x-api-key header is missing, or names no key of this API's usage plan.",
        "no",
        "Send a key of the usage plan in x-api-key.",
        "gateway",
    ),
    # -- counter state: 409, nothing changed ---------------------------------
    ErrorCode(
        "counter_not_found",
        404,
        "No such counter, or it was deleted: next/batch create a counter that never existed only with "
        "AutoCreateCounters=true, and never bring a deleted one back (only an admin's create does). "
        "A PUT of next alone with deleted: true raises a deleted counter's kept mark instead.",
        "no",
        "Create the counter: `idblocks create NAME` (POST /admin/counters), as the message says; "
        "or check the name.",
    ),
    ErrorCode(
        "counter_exists",
        409,
        f"A counter of that name exists already. {_NOT_CHANGED}",
        "no",
        "Use the counter as it is (GET it to see its state), or pick another name.",
    ),
    ErrorCode(
        "below_high_water_mark",
        409,
        "The counter was deleted; start (or max) must be above its high-water mark, which the "
        "message names: the last ID it handed out, or skipped (set moved it past, or blocks went "
        f"unused). {_NOT_CHANGED}",
        "no",
        "Leave start out (it then continues above the mark) or give one above it.",
    ),
    ErrorCode(
        "counter_exhausted",
        409,
        f"The allocation would pass the counter's max. {_NOT_CHANGED}",
        "no",
        "Take fewer IDs (the message says how many are left), or create a counter with a higher max.",
    ),
    ErrorCode(
        "counter_would_move_back",
        409,
        f"PUT would set next at or below an ID already handed out. {_NOT_CHANGED}",
        "no",
        "Give a next at or above the counter's current next (GET it; a deleted counter's is listed by "
        "GET /admin/counters?deleted=true).",
    ),
    ErrorCode(
        "next_beyond_max",
        409,
        f"PUT would set next above max + 1. {_NOT_CHANGED}",
        "no",
        "Give a next of at most max + 1 (max + 1 exhausts the counter).",
    ),
    ErrorCode(
        "region_mismatch",
        409,
        "The counter was created for another region count or region index (the message names both); "
        f"this deployment hands out no ID of it. {_NOT_CHANGED}",
        "no",
        "Fix the deployment's RegionCount/RegionIndex, or move the counter to this region's residue "
        "(docs/global.md, growing the number of regions).",
    ),
    ErrorCode(
        "request_in_progress",
        409,
        "A request with this Idempotency-Key is still running (or its record's in-progress window, "
        "up to 15 s, has not ended).",
        "after Retry-After",
        "Retry with the same key and body after Retry-After seconds; you then get its answer.",
    ),
    # -- body and media type -------------------------------------------------
    ErrorCode(
        "payload_too_large",
        413,
        f"The request body is over the size limit. {_NOT_CHANGED}",
        "no",
        "Send the small JSON object the route takes.",
        "both",
    ),
    ErrorCode(
        "unsupported_media_type",
        415,
        f"The body is not sent as application/json. {_NOT_CHANGED}",
        "no",
        "Send Content-Type: application/json (any case, parameters allowed).",
    ),
    ErrorCode(
        "idempotency_key_reused",
        422,
        f"This Idempotency-Key was used for a request with another body (count). {_NOT_CHANGED}",
        "no",
        "Use a new key for a new request; reuse a key only to retry the identical request.",
    ),
    # -- load and faults -----------------------------------------------------
    ErrorCode(
        "throttled",
        429,
        "A method's request rate (ThrottlingRateLimit applies to each method of the stage) was "
        "exceeded; with API keys, the client key's rate (its daily quota is quota_exceeded).",
        "yes",
        "Retry with jittered exponential backoff (the client does); ask for bigger blocks to need "
        "fewer requests.",
        "gateway",
    ),
    ErrorCode(
        "quota_exceeded",
        429,
        "ClientAuth API_KEY: this client key has made all the requests the usage plan allows it a day "
        "(UsageQuotaPerDay); API Gateway refuses its requests until the quota's day is over and it "
        "resets. The response carries Retry-After: 600, which spaces retries without saying when "
        f"the quota resets. {_NOT_CHANGED}",
        "no",
        "Do not retry in a loop: wait for the quota to reset, or have the operator raise "
        "UsageQuotaPerDay; ask for bigger blocks to need fewer requests a day.",
        "gateway",
    ),
    ErrorCode(
        "internal_error",
        500,
        "A bug: the function failed unexpectedly; it has been logged.",
        "no",
        "Report it with the response's time; the function's log has the stack trace.",
    ),
    ErrorCode(
        "counter_moved_back",
        500,
        "The counter's item in DynamoDB is behind an ID this function environment already took from "
        "it: the table was restored from a backup, or the item was lowered by hand (or deleted, with "
        "AutoCreateCounters on). The "
        "allocation was refused; nothing was handed out and the counter was not moved. It is logged, "
        "counted (the CounterMovedBack metric) and alarmed (CounterMovedBackAlarm).",
        "no",
        "Do not retry: every retry is refused, or (in an environment that never took from the counter) "
        "hands out IDs that were handed out before. An operator moves the counter above every ID it "
        "handed out (PUT next, or idblocks recover) before it is used again.",
    ),
    ErrorCode(
        "service_unavailable",
        503,
        "DynamoDB throttled or failed after botocore's own retries, or a cached counter's setting "
        "changed under every try to take a block. Nothing was handed out twice; "
        "an allocation may or may not have been applied (retry with the same Idempotency-Key).",
        "after Retry-After",
        "Retry after Retry-After seconds, with the same Idempotency-Key.",
    ),
    ErrorCode(
        "gateway_timeout",
        504,
        "The function did not answer within API Gateway's integration timeout. The allocation may "
        "have been applied.",
        "yes",
        "Retry with the same Idempotency-Key: a retry gets the same block instead of a new one.",
        "gateway",
    ),
    ErrorCode(
        "request_refused",
        "4xx",
        "API Gateway refused the request before any function ran, for a reason the codes above do "
        f"not name (the message is API Gateway's). {_NOT_CHANGED}",
        "no",
        "Read the message; check the request against the OpenAPI document.",
        "gateway",
    ),
    ErrorCode(
        "gateway_error",
        "5xx",
        "API Gateway failed before or after the function (e.g. the function crashed or could not "
        "be invoked). An allocation may have been applied.",
        "yes",
        "Retry with the same Idempotency-Key and backoff.",
        "gateway",
    ),
)

ERROR_CODES: dict[str, ErrorCode] = {entry.code: entry for entry in _CATALOGUE}


class IdBlocksError(Exception):
    """Base of every error the service reports to a caller."""

    code = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInput(IdBlocksError):
    """The request itself is wrong; nothing was changed."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class CounterNotFound(IdBlocksError):
    """No such counter (``why``: what else the caller should know, in
    brackets). The message says how one is created: it is the first answer
    a new deployment gives, before anyone has created its counters."""

    code = "counter_not_found"

    def __init__(self, name: str, why: str = "") -> None:
        # A name may begin with "-", which the command line would read as an option.
        command = f"idblocks create {'-- ' if name.startswith('-') else ''}{name}"
        bracket = f" ({why})" if why else ""
        super().__init__(
            f"counter '{name}' does not exist{bracket}: create it with `{command}` (POST /admin/counters)"
        )
        self.name = name


class CounterDeleted(CounterNotFound):
    """A deleted counter: gone for callers, but its high-water mark is kept."""

    def __init__(self, name: str, high_water_mark: int) -> None:
        super().__init__(name)
        self.high_water_mark = high_water_mark


class Conflict(IdBlocksError):
    """The request is well formed but the counter's state forbids it."""


class CounterExists(Conflict):
    code = "counter_exists"

    def __init__(self, name: str) -> None:
        super().__init__(f"counter '{name}' already exists")


class CounterExhausted(Conflict):
    code = "counter_exhausted"

    def __init__(self, name: str, count: int, next_id: int, max_id: int, step: int = 1) -> None:
        # With several regions, only every step-th ID from next is this counter's.
        left = max(0, (max_id - next_id) // step + 1)
        self.next_id = next_id
        self.max_id = max_id
        self.step = step
        # How many IDs the counter can still hand out: what a block shrinks to.
        self.left = left
        super().__init__(
            f"counter '{name}' cannot hand out {count} more ID(s): "
            f"next is {next_id}, max is {max_id}, {left} left"
        )


class CacheBelowCount(Exception):
    """A cached next's block asked for more IDs than the counter's cache
    setting, the most one environment takes at a time; nothing was taken.
    Never a caller's error: the environment asks again for ``cache``."""

    def __init__(self, name: str, count: int, cache: int) -> None:
        super().__init__(f"counter '{name}' takes at most {cache} ID(s) at a time for next, not {count}")
        self.cache = cache


class CounterWouldMoveBack(Conflict):
    code = "counter_would_move_back"

    def __init__(self, name: str, requested: int, next_id: int) -> None:
        super().__init__(
            f"counter '{name}' can only move forward: next is {next_id}, {requested} would hand out IDs again"
        )


class NextBeyondMax(Conflict):
    code = "next_beyond_max"

    def __init__(self, name: str, requested: int, max_id: int) -> None:
        super().__init__(
            f"counter '{name}' ends at max {max_id}; next can be at most {max_id + 1}, not {requested}"
        )


class RegionMismatch(Conflict):
    """The counter's item records another region count or residue than the
    deployment's: allocating would hand out IDs of another region's residue."""

    code = "region_mismatch"

    def __init__(self, name: str, counter_step: int, counter_residue: int, step: int, residue: int) -> None:
        super().__init__(
            f"counter '{name}' was created for RegionCount {counter_step}, residue {counter_residue}; "
            f"this deployment has RegionCount {step}, RegionIndex {residue}"
        )


class BelowHighWaterMark(Conflict):
    """Re-creating a deleted counter at or below its high-water mark. The
    mark is where allocations and set left the counter: the item does not
    say whether IDs up to it were handed out or skipped, so the message
    says neither."""

    code = "below_high_water_mark"

    def __init__(self, name: str, field: str, value: int, high_water_mark: int) -> None:
        super().__init__(
            f"counter '{name}' was deleted with its high-water mark at {high_water_mark} "
            f"(no ID up to it is handed out again, whether it was handed out or skipped); "
            f"{field} must be above {high_water_mark}, not {value}"
        )


class CounterMovedBack(IdBlocksError):
    """The counter's item is behind an ID this environment already took from
    it (logic/taken_marks.py): an allocation from it would hand out IDs
    again. Nothing was taken."""

    code = "counter_moved_back"

    def __init__(self, name: str, first_id: int, last_id: int, taken_up_to: int) -> None:
        ids = f"ID {first_id}" if first_id == last_id else f"IDs {first_id}..{last_id}"
        super().__init__(
            f"counter '{name}' moved back (restored from a backup, or changed by hand): it would hand out "
            f"{ids}, at or below {taken_up_to}, the highest ID this function environment already took "
            f"from it; nothing was handed out"
        )
        self.name = name
        self.first_id = first_id
        self.last_id = last_id
        self.taken_up_to = taken_up_to


class ServiceUnavailable(IdBlocksError):
    """DynamoDB throttled or failed after botocore's own retries."""

    code = "service_unavailable"

    def __init__(self, message: str, retry_after_seconds: int = 1) -> None:
        super().__init__(message)
        self.retry_after_seconds = retry_after_seconds


class IdempotencyKeyReused(IdBlocksError):
    code = "idempotency_key_reused"

    def __init__(self) -> None:
        super().__init__(
            "this Idempotency-Key was already used for a request with a different body; "
            "use a new key for a new request"
        )


class RequestInProgress(IdBlocksError):
    code = "request_in_progress"

    def __init__(self, retry_after_seconds: int = 1) -> None:
        super().__init__("a request with this Idempotency-Key is still in progress; retry after it completes")
        self.retry_after_seconds = retry_after_seconds


class StoreFailure(IdBlocksError):
    """DynamoDB refused a call for a reason no retry cures (a missing table, a
    request it calls invalid, denied access): a bug or a broken deployment.
    The cause is kept (``__cause__``) and logged; the caller gets a 500."""

    code = "internal_error"

    def __init__(self) -> None:
        super().__init__("internal error; it has been logged")
