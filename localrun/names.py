"""The name someone most likely meant, for the messages that refuse a name
(a template parameter, an identity's role): a typo gets its correction."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """ " (did you mean X?)" for the one of ``known`` that ``name`` looks
    most like, whatever its case; "" when none is close."""
    by_folded = {option.casefold(): option for option in known}
    close = difflib.get_close_matches(name.casefold(), by_folded, n=1)
    return f" (did you mean {by_folded[close[0]]}?)" if close else ""
