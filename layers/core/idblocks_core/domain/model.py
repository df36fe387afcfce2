"""The values the core hands around: a counter's public state and a block of IDs."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Block:
    """IDs ``start``, ``start + step``, ... up to ``end``, both inclusive,
    handed out to one caller. ``step`` is the deployment's region count: 1
    in a single region, where a block is consecutive IDs."""

    start: int
    end: int
    # True when this is an earlier allocation's block, answered again to its
    # retry: the IDs were handed out once already and are not counted again.
    replayed: bool = field(default=False, compare=False)
    step: int = 1
    # The share of the counter's IDs 1..max not yet handed out after this
    # block, in percent (None where the write did not say): what an operator's
    # "counter running low" alarm watches.
    range_left_percent: float | None = field(default=None, compare=False)
    # What the write that took it carried and saw (None where not known):
    # its token, which names it while it is still the counter's last write,
    # and the counter's cache setting as the write applied it.
    token: str | None = field(default=None, compare=False, repr=False)
    cache: int | None = field(default=None, compare=False)

    @property
    def count(self) -> int:
        return (self.end - self.start) // self.step + 1


@dataclass(frozen=True)
class Counter:
    name: str
    next: int  # the next ID this counter will hand out; above max once exhausted
    max: int  # the last ID it may hand out
    created_at: str
    updated_at: str
    # The region count and residue the counter was created (or revived) with:
    # it hands out only IDs congruent to residue modulo step.
    step: int = 1
    residue: int = 0
    # The most IDs a function environment takes at a time for next (1: a
    # write per ID, nothing held in memory).
    cache: int = 1
    # Deleted: it hands out nothing, and ``next`` is one past the high-water
    # mark it keeps, where a re-creation continues (in the residue of the
    # deployment that re-creates it).
    deleted: bool = False

    @property
    def exhausted(self) -> bool:
        return self.next > self.max

    def as_dict(self) -> dict[str, object]:
        """The state the API shows. An exhausted counter has no next ID: at
        max 2^63-1, max + 1 would not even be an integer the API can carry.
        A deleted one always shows its next (at most 2^63, which the API
        takes as next too), and says it is deleted; a live one's answer has
        no ``deleted``, as before deleted counters were ever shown."""
        state: dict[str, object] = {
            "name": self.name,
            "next": None if self.exhausted and not self.deleted else self.next,
            "exhausted": self.exhausted,
            "max": self.max,
            "step": self.step,
            "residue": self.residue,
            "cache": self.cache,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }
        if self.deleted:
            state["deleted"] = True
        return state
