"""Checks over every range a run handed out: nothing twice, nothing outside
[1, high-water mark], and (where no fault may cost IDs) nothing missing; and
how far a dev server's counter moved, by its admin GET."""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from collections.abc import Iterable


def check_ranges(
    allocations: Iterable[tuple[str, int, int, str | None]],
    high_water: dict[str, int],
    *,
    must_tile: bool,
) -> dict[str, int]:
    """Raise AssertionError on any overlap, any ID outside [1, high-water
    mark], a key answered with two different ranges, or (``must_tile``) any
    gap. Returns the IDs never handed out (the gaps), per counter."""
    by_key: dict[tuple[str, str], tuple[int, int]] = {}
    # Who received each range: a key (its repeats share one answer) or a
    # request of its own. Two receivers of one range is a duplicate.
    receivers: dict[str, dict[tuple[int, int], set[object]]] = defaultdict(lambda: defaultdict(set))
    for index, (counter, start, end, key) in enumerate(allocations):
        assert 1 <= start <= end, (counter, start, end)
        if key:
            first = by_key.setdefault((counter, key), (start, end))
            assert first == (start, end), f"key {key} on {counter} answered {first} and {(start, end)}"
        receivers[counter][(start, end)].add(("key", key) if key else ("request", index))
    ranges = {}
    for counter, spans in receivers.items():
        for span, who in spans.items():
            assert len(who) == 1, f"{counter}: {span} was handed out {len(who)} times"
        ranges[counter] = set(spans)
    gaps = {}
    for counter, spans in ranges.items():
        ordered = sorted(spans)
        top = high_water[counter]
        assert ordered[-1][1] <= top, f"{counter}: {ordered[-1]} is above the high-water mark {top}"
        missing = ordered[0][0] - 1
        for (_, end), (start, _) in itertools.pairwise(ordered):
            assert start > end, f"{counter}: IDs {start}..{end} were handed out twice"
            missing += start - end - 1
        missing += top - ordered[-1][1]
        if must_tile:
            assert missing == 0, (
                f"{counter}: {missing} IDs below the high-water mark {top} were never handed out"
            )
        gaps[counter] = missing
    return gaps


def logged_gaps(output: Iterable[str]) -> dict[str, int]:
    """The IDs the store logged as possibly held by no one, per counter: each
    "possible gap" line is an allocation write that went unanswered, was
    retried and took a new block (docs/guarantees.md, "No gaps")."""
    gaps: dict[str, int] = defaultdict(int)
    for line in output:
        if '"possible gap' in line:
            record = json.loads(line[line.index("{") :])
            gaps[record["counter"]] += record["ids"]
    return dict(gaps)


def next_of(dev, counter: str) -> int:
    """The next ID of ``counter`` on dev server ``dev``: its high-water mark + 1."""
    return dev.get(f"/admin/counters/{counter}").json()["next"]


def skipped(dev, counter: str, used: int) -> int:
    """IDs ``counter`` moved past that were never handed out, ``used`` having been."""
    return next_of(dev, counter) - 1 - used
