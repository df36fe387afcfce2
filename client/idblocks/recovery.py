"""``idblocks recover``: after a restore from a backup, move every counter
above every ID that was handed out, so that none is handed out again.

A DynamoDB restore makes a new table holding each counter as it was at the
restore point; once a stack runs on it, every ID handed out after that point
would be handed out again. Two sources say how far each counter went since:
the other table (the one the stack ran on until the restore, or the
restored one), and the allocation records the functions logged. The plan
takes, per counter, the highest ID either shows (``handed_out``) and makes
the stack's counter hand out only IDs above it:

- a live counter whose next is not above it is set to next = handed_out + 1
  (the service moves it to the first ID of its residue from there); one
  whose max is not above it is exhausted (next = max + 1): every ID it could
  still hand out may have been handed out;
- a deleted counter's kept mark is raised the same way, and it stays deleted;
- a counter the stack does not have is created above it (with the other
  table's max and cache), and exhausted as above if it was exhausted there;
- a counter deleted in the other table ends deleted here too, after its
  mark was raised.

Every step goes through the admin API, as ``idblocks create/set/delete`` do,
and only ever raises a mark: a step that fails leaves what was done before it
in place, and running the plan again finishes it; once done, a run finds
nothing to do. A counter the stack has and no source names is left as it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeGuard

from idblocks.counters_table import StoredCounter, read_counters
from idblocks.errors import Conflict, CounterNotFound, IdBlocksError, UnexpectedResponse
from idblocks.records import read_records

# The default max of a counter created without one (the service's).
DEFAULT_MAX_ID = 2**53 - 1
# The largest ID any counter may reach (the service's LIMIT_MAX_ID).
LIMIT_MAX_ID = 2**63 - 1
# Counters asked for a page of the stack's list.
PAGE = 1000


class OlderStack(IdBlocksError):
    """The stack's admin API does not list deleted counters: the plan could
    not see them, and would bring them back."""


@dataclass(frozen=True)
class HereCounter:
    """A counter as the stack's admin API lists it: ``next`` is the next ID it
    hands out (None once exhausted) or, deleted, one past the mark it keeps."""

    name: str
    next: int | None
    max: int
    deleted: bool = False


@dataclass(frozen=True)
class Step:
    """One admin request: ``set`` (PUT next), ``create`` (POST, with start,
    max and cache) or ``delete``."""

    do: str
    next: int | None = None
    start: int | None = None
    max: int | None = None
    cache: int | None = None

    def as_dict(self) -> dict[str, Any]:
        shown = {"next": self.next, "start": self.start, "max": self.max, "cache": self.cache}
        return {"step": self.do} | {key: value for key, value in shown.items() if value is not None}


@dataclass
class CounterPlan:
    """What a counter is here, what the sources say was handed out, and the
    steps that put it above all of it."""

    name: str
    here: HereCounter | None
    other: StoredCounter | None
    records: int | None
    handed_out: int
    steps: list[Step]
    why: str
    done: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        if self.here is None:
            now: dict[str, Any] = {"state": "absent"}
        elif self.here.deleted:
            now = {"state": "deleted", "next": self.here.next}
        elif self.here.next is None:
            now = {"state": "exhausted", "max": self.here.max}
        else:
            now = {"state": "live", "next": self.here.next}
        sources: dict[str, Any] = {}
        if self.other is not None:
            sources["other_table"] = {"mark": self.other.hwm, "deleted": self.other.deleted}
        if self.records is not None:
            sources["records"] = {"last_id": self.records}
        shown = {
            "counter": self.name,
            "now": now,
            "handed_out_up_to": self.handed_out,
            "sources": sources,
            "plan": [step.as_dict() for step in self.steps],
            "why": self.why,
        }
        return shown | ({"done": self.done} if self.done else {})


def recover(
    backend: Any, *, table: str | None, record_files: list[str], region: str | None, dry_run: bool
) -> dict[str, Any]:
    """Read every source (the records first: they need no network), then
    what the stack has, then plan; carry the plan out unless ``dry_run``.
    Returns the report; Stopped, with the report so far, at a step that
    fails. Nothing is changed before every source was read whole."""
    sources: dict[str, Any] = {}
    records = None
    if record_files:
        found = read_records(record_files)
        records = found.highest
        sources["records"] = {
            "files": record_files,
            "records": found.records,
            "skipped": found.skipped,
            "counters": len(found.highest),
        }
    other = None
    if table is not None:
        other = read_counters(table, region=region)
        sources["table"] = {"name": table, "counters": len(other)}
    here = counters_here(backend)
    plans = plan(here, other, records)
    if not dry_run:
        try:
            apply(backend, plans)
        except StepFailed as failed:
            shown = report(plans, dry_run=dry_run, sources=sources, here=here)
            shown["failed"] = {
                "counter": failed.plan.name,
                **failed.step.as_dict(),
                "error": str(failed.error),
            }
            raise Stopped(shown, failed) from failed.error
    return report(plans, dry_run=dry_run, sources=sources, here=here)


class Stopped(IdBlocksError):
    """A step failed: ``report`` says what was done before it, ``error`` why."""

    def __init__(self, shown: dict[str, Any], failed: StepFailed) -> None:
        step = failed.step.as_dict()
        super().__init__(
            f"recover stopped at counter {failed.plan.name!r}, step {step}: {failed.error}; the steps "
            "before it are done (the report is on stdout): run recover again once the cause is fixed"
        )
        self.report = shown
        self.error = failed.error


# -- what the stack has ------------------------------------------------------------------


def counters_here(backend: Any) -> dict[str, HereCounter]:
    """Every counter the stack's admin API lists, deleted ones included."""
    found: dict[str, HereCounter] = {}
    cursor = None
    while True:
        page = backend.list(limit=PAGE, cursor=cursor, deleted=True)
        if page.get("deleted") is not True:
            raise OlderStack(
                "the stack's admin API lists no deleted counters (GET /admin/counters?deleted=true answered "
                'a page without "deleted": true): it is older than this client; update the stack first, '
                "or counters deleted there would be brought back"
            )
        for state in page["counters"]:
            counter = _here_of(state)
            found[counter.name] = counter
        cursor = page.get("cursor")
        if not cursor:
            return found


def _here_of(state: Any) -> HereCounter:
    if isinstance(state, dict):
        name, next_id, max_id = state.get("name"), state.get("next"), state.get("max")
        deleted = state.get("deleted") is True
        if (
            isinstance(name, str)
            and _is_int(max_id)
            and (_is_int(next_id) or (next_id is None and not deleted))
        ):
            return HereCounter(name, next_id, max_id, deleted)
    raise UnexpectedResponse(f"list answered a counter this client cannot read: {state!r}")


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


# -- the plan -------------------------------------------------------------------------


def plan(
    here: dict[str, HereCounter],
    other: dict[str, StoredCounter] | None,
    records: dict[str, int] | None,
) -> list[CounterPlan]:
    """A plan for every counter the other table or the records name, by name."""
    named = set(other or {}) | set(records or {})
    return [
        _plan_one(name, here.get(name), (other or {}).get(name), (records or {}).get(name))
        for name in sorted(named)
    ]


def _plan_one(
    name: str, here: HereCounter | None, other: StoredCounter | None, recorded: int | None
) -> CounterPlan:
    handed_out = max(mark for mark in (other.hwm if other else None, recorded) if mark is not None)
    told = _sources(other, recorded)
    steps: list[Step] = []
    if here is None:
        steps = _create(handed_out, other)
        why = f"not here; {told}"
    elif here.deleted:
        assert here.next is not None  # a deleted counter always shows its next (_here_of)
        if here.next <= handed_out:
            steps.append(Step("set", next=handed_out + 1))
            why = f"deleted here, keeping a mark below what was handed out: {told}; it stays deleted"
        else:
            why = f"deleted here, keeping a mark above every ID handed out ({told})"
    elif here.next is None:
        why = f"exhausted here: it hands out nothing more ({told})"
    elif here.next > handed_out:
        why = f"next {here.next} is above every ID handed out ({told})"
    elif handed_out < here.max:
        steps.append(Step("set", next=handed_out + 1))
        why = f"next {here.next} is not above every ID handed out: {told}"
    else:
        steps.append(Step("set", next=here.max + 1))
        why = (
            f"its max {here.max} is not above every ID handed out ({told}): exhausted, "
            "as any ID it could still hand out may have been"
        )
    if other is not None and other.deleted and (here is None or not here.deleted):
        steps.append(Step("delete"))
        why += "; deleted in the other table, so deleted here too"
    return CounterPlan(name, here, other, recorded, handed_out, steps, why)


def _create(handed_out: int, other: StoredCounter | None) -> list[Step]:
    start = handed_out + 1
    if start > LIMIT_MAX_ID:
        raise PlanError(f"IDs up to {handed_out} were handed out: no counter can start above that")
    max_id = other.max if other is not None else max(DEFAULT_MAX_ID, start)
    cache = other.cache if other is not None else None
    if start <= max_id:
        return [Step("create", start=start, max=max_id, cache=cache)]
    # Exhausted there: created with the one ID above everything, then exhausted.
    return [Step("create", start=start, max=start, cache=cache), Step("set", next=start + 1)]


class PlanError(IdBlocksError):
    """A counter no step can put above what was handed out."""


def _sources(other: StoredCounter | None, recorded: int | None) -> str:
    said = []
    if other is not None:
        said.append(f"the other table's mark is {other.hwm}" + (" (deleted there)" if other.deleted else ""))
    if recorded is not None:
        said.append(f"the records' highest ID is {recorded}")
    return " and ".join(said)


# -- carrying it out -----------------------------------------------------------------


@dataclass
class StepFailed(Exception):
    """A step the service refused or did not answer; the steps before it are done."""

    plan: CounterPlan
    step: Step
    error: IdBlocksError


def apply(backend: Any, plans: list[CounterPlan]) -> None:
    """Every step of every plan, in order; StepFailed at the first that fails."""
    for counter in plans:
        for step in counter.steps:
            try:
                outcome = _do(backend, counter.name, step)
            except IdBlocksError as exc:
                raise StepFailed(counter, step, exc) from exc
            counter.done.append(step.as_dict() | {"result": outcome})


def _do(backend: Any, name: str, step: Step) -> str:
    if step.do == "create":
        state = backend.create(name, start=step.start, max_id=step.max, cache=step.cache)
        return f"created: next {state.get('next')}"
    if step.do == "set":
        try:
            # A counter deleted here keeps being deleted, its mark raised.
            state = backend.set_next(name, step.next, deleted=True)
        except Conflict as exc:
            if exc.code != "counter_would_move_back":
                raise
            # Moved above meanwhile (an allocation, another run): what the step was for.
            return "already above"
        return f"next {state.get('next')}" + (" (deleted)" if state.get("deleted") else "")
    try:
        backend.delete(name)
    except CounterNotFound:
        return "already deleted"
    return "deleted"


def report(
    plans: list[CounterPlan], *, dry_run: bool, sources: dict[str, Any], here: dict[str, HereCounter]
) -> dict[str, Any]:
    """What the run read, planned and did, as the command prints it."""
    changing = [counter for counter in plans if counter.steps]
    named = {counter.name for counter in plans}
    return {
        "dry_run": dry_run,
        "sources": sources,
        "to_change": len(changing),
        "unchanged": len(plans) - len(changing),
        # Counters the stack has that no source names: left as they are.
        "not_named": len(set(here) - named),
        "counters": [counter.as_dict() for counter in plans],
    }
