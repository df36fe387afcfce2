"""The allocation records the service's functions log (one JSON line per
request that was handed IDs: ``counter``, ``first_id``, ``last_id``,
``step``...), read from the files a user has them in, for ``idblocks
recover``: the highest ID each counter handed out.

A file may hold them in any of these shapes, mixed and concatenated:

- the records themselves, a JSON object a line, among other lines: the
  dev server's ``--records`` output, the messages of a log group as text;
- what ``aws logs filter-log-events`` prints: its JSON (one page or several
  put one after the other, as printed or compacted) or ``--output text``
  (each event a line, its message a column);
- a CloudWatch Logs Insights export of the saved query's fields (``counter``,
  ``first_id``, ``last_id``, ``step``...), or of ``@message``: what ``aws logs
  get-query-results`` prints (JSON), or the console's "Export results",
  "Download table (CSV)" and "Download table (JSON)".

Anything else (another log line, an event or a row that is not an allocation
record) is skipped and counted. What looks like a record but cannot be read
exactly (a bad counter name, an ID that is not a whole number, or one from
Logs Insights above 2^53, where it carries numbers as doubles) stops the
reading: left out, its IDs could be handed out again. So does a Logs
Insights result that may be cut short (a query still running, a page that
says more follow, exactly a multiple of 10,000 rows), and a file with no
record at all.

The file is read as a stream, a line or a JSON value at a time: memory does
not grow with its size, which is bounded (``RECORDS_FILE_LIMIT``) before
anything is read when the file says its size.
"""

from __future__ import annotations

import csv
import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TextIO

from idblocks.errors import IdBlocksError
from idblocks.routes import check_name

# The largest file read: about a million records as `aws logs
# filter-log-events` prints them. Records of a longer time can be given in
# several files.
RECORDS_FILE_LIMIT = 1 << 30
# The largest line read whole, and the largest JSON value inside a document
# (an event, a row): a record is under a kilobyte, and a page of
# filter-log-events compacted onto one line a few MiB; a longer line is read
# as it streams, a value at a time.
VALUE_LIMIT = 4 << 20
# Logs Insights stops at 10,000 rows a query (its default limit, and a page
# of get-query-results): a result of a multiple of it may be cut short.
INSIGHTS_ROWS = 10_000
# Logs Insights holds numbers as doubles: exact up to here.
INSIGHTS_EXACT = 2**53
# The largest ID any counter may reach (the service's LIMIT_MAX_ID).
LIMIT_MAX_ID = 2**63 - 1

_CHUNK = 1 << 16
_DECODER = json.JSONDecoder()
_WHOLE = re.compile(r"[0-9]{1,19}")
_SPACE = re.compile(r"\s+")


class RecordsError(IdBlocksError):
    """The records cannot be read, or could leave IDs out: nothing is changed."""


@dataclass
class Records:
    """What the files held: each counter's highest ID handed out, how many
    records said so, and how many entries were not records."""

    highest: dict[str, int] = field(default_factory=dict)
    records: int = 0
    skipped: int = 0

    def add(self, counter: str, last_id: int) -> None:
        self.records += 1
        if last_id > self.highest.get(counter, 0):
            self.highest[counter] = last_id


def read_records(paths: list[str], limit: int = RECORDS_FILE_LIMIT) -> Records:
    """Every record of every file in ``paths``; RecordsError if one is too
    large, holds no record, or holds one that cannot be read exactly."""
    found = Records()
    for path in paths:
        before = found.records
        _read_file(path, found, limit)
        if found.records == before:
            raise RecordsError(
                f'{path} holds no allocation record (lines of JSON with "message": "allocation", '
                "or a filter-log-events or Logs Insights export of them): is it the right file?"
            )
    return found


def _read_file(path: str, found: Records, limit: int) -> None:
    try:
        size = os.stat(path).st_size if os.path.isfile(path) else None
        if size is not None and size > limit:
            raise RecordsError(
                f"{path} is {size:,} bytes, over the {limit:,} one file may hold: "
                "split the records into several files (--from-records takes several)"
            )
        with open(path, encoding="utf-8", errors="replace", newline="") as stream:
            _Reader(_Text(stream, path, limit), found).read()
    except OSError as exc:
        raise RecordsError(f"cannot read {path}: {exc.strerror or exc}") from None


# -- a stream of text ---------------------------------------------------------------


class _Broken(Exception):
    """JSON that does not parse, on a line of the text."""

    def __init__(self, line: int) -> None:
        super().__init__()
        self.line = line


class _Text:
    """A file's text, read a chunk at a time: a buffer (what is behind the
    position is dropped as more is read), the position in it, and the line
    the position is on."""

    def __init__(self, stream: TextIO, path: str, limit: int) -> None:
        self.stream = stream
        self.path = path
        self.limit = limit
        self.buffer = ""
        self.pos = 0
        self.eof = False
        self._read_chars = 0
        self._offset = 0  # where the buffer starts in the text
        self._line_at_buffer = 1
        self._known = (0, 1)  # a position of the buffer, and its line

    def fill(self) -> bool:
        """Read another chunk; False at the end."""
        if self.eof:
            return False
        chunk = self.stream.read(_CHUNK)
        if not chunk:
            self.eof = True
            return False
        self._read_chars += len(chunk)
        if self._read_chars > self.limit:
            # A stream (a pipe) says no size before it is read: stopped here.
            raise RecordsError(f"{self.path} holds more than the {self.limit:,} bytes one file may hold")
        if self.pos > _CHUNK:
            self._line_at_buffer = self.line_at(self.pos)
            self._offset += self.pos
            self.buffer = self.buffer[self.pos :]
            self.pos = 0
            self._known = (0, self._line_at_buffer)
        self.buffer += chunk
        return True

    def tell(self) -> int:
        return self._offset + self.pos

    def line_at(self, pos: int | None = None) -> int:
        """The number of the line the position (of the buffer) is on."""
        pos = self.pos if pos is None else pos
        # Counted on from the last position asked about: asked for every
        # element of a long page, counting from the buffer's start each time
        # would read the buffer again for each.
        known_pos, known_line = self._known
        if pos < known_pos:
            known_pos, known_line = 0, self._line_at_buffer
        line = known_line + self.buffer.count("\n", known_pos, pos)
        self._known = (pos, line)
        return line

    def where(self, line: int | None = None) -> str:
        return f"{self.path}, line {self.line_at() if line is None else line}"

    def peek(self) -> str:
        """The character at the position, reading more if needed ('' at the end)."""
        while self.pos >= len(self.buffer):
            if not self.fill():
                return ""
        return self.buffer[self.pos]

    def skip_space(self) -> str:
        """Past white space; the character after it ('' at the end)."""
        while True:
            found = _SPACE.match(self.buffer, self.pos)
            self.pos = found.end() if found else self.pos
            if self.pos < len(self.buffer) or not self.fill():
                return self.buffer[self.pos] if self.pos < len(self.buffer) else ""

    def expect(self, chars: str) -> str:
        char = self.skip_space()
        if char == "" or char not in chars:
            raise _Broken(self.line_at())
        self.pos += 1
        return char

    def value(self) -> Any:
        """The JSON value at the position (after white space), at most
        VALUE_LIMIT characters long."""
        self.skip_space()
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buffer, self.pos)
            except json.JSONDecodeError as exc:
                # Cut by the end of the buffer, or broken: more text tells which.
                if len(self.buffer) - self.pos > VALUE_LIMIT or not self.fill():
                    raise _Broken(self.line_at(min(exc.pos, len(self.buffer)))) from None
                continue
            # A number that ends with the buffer may go on in the next chunk.
            if end < len(self.buffer) or not self.fill():
                self.pos = end
                return value

    def line(self) -> str | None:
        """The rest of the line (without its end), or None at the end of the
        text. A line longer than VALUE_LIMIT is passed over, as ''."""
        if self.peek() == "":
            return None
        while True:
            end = self.buffer.find("\n", self.pos)
            if end >= 0:
                text = self.buffer[self.pos : end]
                self.pos = end + 1
                return text.removesuffix("\r")
            if len(self.buffer) - self.pos > VALUE_LIMIT:
                self.pos = len(self.buffer)
                while self.fill() and (end := self.buffer.find("\n", self.pos)) < 0:
                    self.pos = len(self.buffer)
                self.pos = len(self.buffer) if end < 0 else end + 1
                return ""
            if not self.fill():
                text = self.buffer[self.pos :]
                self.pos = len(self.buffer)
                return text.removesuffix("\r")

    def line_ahead(self) -> tuple[str, int]:
        """The rest of the line, without moving (at most VALUE_LIMIT
        characters), and where the next line starts in the text."""
        while True:
            end = self.buffer.find("\n", self.pos)
            if end >= 0:
                return self.buffer[self.pos : end], self._offset + end + 1
            if len(self.buffer) - self.pos > VALUE_LIMIT or not self.fill():
                return self.buffer[self.pos :], self._offset + len(self.buffer)

    def move_to(self, position: int) -> None:
        """Forward to ``position`` of the text (one line_ahead gave)."""
        while self._offset + len(self.buffer) < position and self.fill():
            pass
        self.pos = min(position - self._offset, len(self.buffer))


# -- what the text holds -------------------------------------------------------------


@dataclass
class _Pages:
    """Results that come in pages (filter-log-events, get-query-results):
    whether the last page read says more follow, and the rows read since
    the first page of these results."""

    more_follow: bool = False
    rows: int = 0


# Members of a JSON object kept to tell what it is (a record is a few dozen);
# past this many characters, only those that say whether pages follow.
_KEPT_LIMIT = 1 << 16
_PAGE_KEYS = ("nextToken", "NextToken", "status")


class _Reader:
    def __init__(self, text: _Text, found: Records) -> None:
        self.text = text
        self.found = found
        self.events = _Pages()
        self.results = _Pages()

    def read(self) -> None:
        text = self.text
        first = True
        while text.skip_space() != "":
            line = text.line_at()
            if text.peek() in "{[":
                self._json(line)
            else:
                rest = text.line() or ""
                if first and _csv_header(rest):
                    self._csv(rest)
                    return
                self._text_line(rest, line)
            first = False
        if self.events.more_follow:
            raise RecordsError(
                f"{text.path}: its last filter-log-events page says more follow (a nextToken): "
                "add the pages after it, or print them all (leave out --no-paginate and --max-items)"
            )
        if self.results.more_follow:
            raise RecordsError(
                f"{text.path}: its last get-query-results page says more follow (a nextToken): "
                "add the pages after it (aws logs get-query-results --next-token ...)"
            )

    def _text_line(self, rest: str, line: int) -> None:
        """Text: a record if it holds one, as a JSON object from its first
        '{' (a record's line; the message column of --output text)."""
        brace = rest.find("{")
        if brace >= 0:
            try:
                value, _ = _DECODER.raw_decode(rest, brace)
            except json.JSONDecodeError:
                value = None
            if self._entry(value, line, insights=False):
                return
        self.found.skipped += 1

    def _json(self, line: int) -> None:
        """JSON, from a bracket: a record, a page of filter-log-events or
        get-query-results, a console export. A bracket alone on its line
        begins a document printed over many lines (as the AWS CLI prints
        JSON), read as it streams by: broken anywhere, it is a damaged file,
        which stops the reading. Otherwise the value is its line (a record's
        line, a compacted page): a line that is not JSON is text."""
        text = self.text
        ahead, next_line = text.line_ahead()
        whole_line = len(ahead) < VALUE_LIMIT
        if ahead.strip() not in ("{", "[") and whole_line:
            try:
                value, _ = _DECODER.raw_decode(ahead.strip())
            except json.JSONDecodeError:
                value = None
            text.move_to(next_line)
            if isinstance(value, dict | list):
                self._value(value, line)
            else:
                self._text_line(ahead, line)
            return
        try:
            if text.peek() == "[":
                self._top_array(line)
            else:
                self._object(line)
        except _Broken as broken:
            raise RecordsError(
                f"{text.where(line)}: the JSON that starts there is broken at line {broken.line}: "
                "is the file cut short?"
            ) from None

    def _value(self, value: dict[str, Any] | list[Any], line: int) -> None:
        """A JSON value read whole, as _object and _top_array read one that streams."""
        if isinstance(value, list):
            rows = 0
            self.found.skipped += not value
            for element in value:
                rows += self._top_element(element, line)
            if rows:
                self._check_rows(len(value), line)
        elif isinstance(value.get("results"), list):
            for row in value["results"]:
                self._result_row(row, line)
            self._query_results(value, len(value["results"]), line)
        elif isinstance(value.get("events"), list):
            for event in value["events"]:
                self._event(event, line)
            self.events.more_follow = any(key in value for key in ("nextToken", "NextToken"))
        elif not self._entry(value, line, insights=False):
            self.found.skipped += 1

    def _object(self, line: int) -> None:
        """A JSON object whose "events" or "results" are streamed, element by
        element; its other members are kept to tell what it is."""
        text = self.text
        text.expect("{")
        members: dict[str, Any] = {}
        streamed: dict[str, int] = {}
        kept = 0
        if text.skip_space() == "}":
            text.pos += 1
        else:
            while True:
                key = text.value()
                if not isinstance(key, str):
                    raise _Broken(text.line_at())
                text.expect(":")
                if key in ("events", "results") and text.skip_space() == "[":
                    handle = self._event if key == "events" else self._result_row
                    streamed[key] = self._array(handle)
                else:
                    before = text.tell()
                    value = text.value()
                    kept += text.tell() - before + len(key)
                    if kept <= _KEPT_LIMIT or key in _PAGE_KEYS:
                        members[key] = value
                if text.expect(",}") == "}":
                    break
        if "results" in streamed:
            self._query_results(members, streamed["results"], line)
        elif "events" in streamed:
            self.events.more_follow = any(key in members for key in ("nextToken", "NextToken"))
        elif not self._entry(members, line, insights=False):
            self.found.skipped += 1

    def _array(self, handle: Callable[[Any, int], None]) -> int:
        """Each element of a JSON array, to ``handle`` with its line; how many
        there were."""
        text = self.text
        text.expect("[")
        count = 0
        if text.skip_space() == "]":
            text.pos += 1
            return 0
        while True:
            text.skip_space()
            line = text.line_at()
            handle(text.value(), line)
            count += 1
            if text.expect(",]") == "]":
                return count

    def _top_array(self, line: int) -> None:
        """An array that is a whole document: the console's "Download table
        (JSON)", a row an object; or events (as jq's .events prints them)."""
        rows = 0

        def element(value: Any, at: int) -> None:
            nonlocal rows
            rows += self._top_element(value, at)

        count = self._array(element)
        self.found.skipped += not count
        if rows:
            self._check_rows(count, line)

    def _top_element(self, value: Any, line: int) -> int:
        """An element of a top-level array; 1 if it is a Logs Insights row."""
        is_event = isinstance(value, dict) and isinstance(value.get("message"), str)
        if not self._entry(value, line, insights=not is_event):
            self.found.skipped += 1
        return 0 if is_event else 1

    def _event(self, event: Any, line: int) -> None:
        if not self._entry(event, line, insights=False):
            self.found.skipped += 1

    def _result_row(self, row: Any, line: int) -> None:
        """A row of get-query-results: a list of {"field", "value"}."""
        fields: dict[str, Any] = {}
        if isinstance(row, list):
            for cell in row:
                if isinstance(cell, dict) and isinstance(cell.get("field"), str):
                    fields[cell["field"]] = cell.get("value")
        if not self._entry(fields, line, insights=True):
            self.found.skipped += 1

    def _query_results(self, members: dict[str, Any], rows: int, line: int) -> None:
        status = members.get("status")
        if status is not None and status != "Complete":
            raise RecordsError(
                f"{self.text.where(line)}: the query's status is {status!r}, not Complete: "
                "its results are partial; get them again once it has completed"
            )
        self.results.rows += rows
        self.results.more_follow = "nextToken" in members
        if not self.results.more_follow:
            total, self.results.rows = self.results.rows, 0
            self._check_rows(total, line)

    def _check_rows(self, rows: int, line: int) -> None:
        if rows and rows % INSIGHTS_ROWS == 0:
            raise RecordsError(
                f"{self.text.where(line)}: the Logs Insights results hold {rows:,} rows, a multiple of the "
                f"{INSIGHTS_ROWS:,} a query returns at most by default: they may be cut short; query "
                "shorter time ranges (each in a file of its own), or use aws logs filter-log-events"
            )

    def _entry(self, value: Any, line: int, *, insights: bool) -> bool:
        """Whether ``value`` is a record (counted in); a record that cannot be
        read exactly stops the reading."""
        try:
            record = _record_of(value, insights=insights)
        except _Unreadable as exc:
            raise RecordsError(
                f"{self.text.where(line)}: an allocation record that cannot be read exactly ({exc}); "
                "left out, its IDs could be handed out again: correct or remove it"
            ) from None
        if record is None:
            return False
        self.found.add(*record)
        return True

    def _csv(self, header: str) -> None:
        """The console's "Download table (CSV)": a header of the query's
        fields, then a row a line (a quoted value may span lines)."""
        names = next(csv.reader([header]))
        line = self.text.line_at() - 1
        rows = 0
        try:
            for row in csv.reader(self._lines()):
                if not row:
                    continue
                rows += 1
                values = dict(zip(names, row, strict=False))
                if not self._entry(values, self.text.line_at() - 1, insights=True):
                    self.found.skipped += 1
        except csv.Error as exc:
            raise RecordsError(f"{self.text.where()}: not CSV ({exc})") from None
        self._check_rows(rows, line)

    def _lines(self) -> Iterator[str]:
        while (line := self.text.line()) is not None:
            yield line + "\n"


def _csv_header(line: str) -> bool:
    """Whether a file's first line is a CSV header of Logs Insights fields
    that name a counter and its last ID, or the whole line (@message)."""
    if "{" in line:
        return False
    names = next(csv.reader([line]), [])
    return "@message" in names or ("counter" in names and "last_id" in names)


# -- one record ---------------------------------------------------------------------


class _Unreadable(Exception):
    """A record whose counter or IDs cannot be read exactly."""


def _record_of(value: Any, *, insights: bool) -> tuple[str, int] | None:
    """(counter, last ID) of a record, None for what is not one. A record is
    the functions' log line (``"message": "allocation"``), also as an event's
    ``message`` or a row's ``@message``; or, from Logs Insights, a row with
    a counter and a last_id."""
    if not isinstance(value, dict):
        return None
    message = value.get("message")
    if message == "allocation":
        return _read(value, insights=insights)
    for wrapped in (message, value.get("@message")):
        # The line as written, in a string; or, from the console, an object
        # it parsed, whose numbers went through doubles as Logs Insights' do.
        parsed = isinstance(wrapped, dict)
        inner = wrapped if parsed else _json_object(wrapped)
        if inner is not None:
            record = _record_of(inner, insights=parsed)
            if record is not None:
                return record
    if insights and "counter" in value and "last_id" in value:
        return _read(value, insights=True)
    return None


def _json_object(value: Any) -> dict[str, Any] | None:
    """The JSON object a string holds, if it holds one."""
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            parsed, _ = _DECODER.raw_decode(value.strip())
        except json.JSONDecodeError:
            return None
        return parsed if isinstance(parsed, dict) else None
    return None


def _read(record: dict[str, Any], *, insights: bool) -> tuple[str, int]:
    name = record.get("counter")
    try:
        counter = check_name(name)
    except ValueError:
        raise _Unreadable(f"counter {name!r} is not a counter name") from None
    last = _whole(record, "last_id", insights)
    first = _whole(record, "first_id", insights) if record.get("first_id") is not None else last
    step = _whole(record, "step", insights) if record.get("step") is not None else 1
    if not 1 <= first <= last <= LIMIT_MAX_ID or step < 1:
        raise _Unreadable(f"first_id {first}, last_id {last}, step {step} are not a block of IDs")
    return counter, last


def _whole(record: dict[str, Any], key: str, insights: bool) -> int:
    """A whole number: a JSON integer, or, from Logs Insights (which hands
    every value over as text), its decimal digits, up to 2^53 (beyond it,
    what Logs Insights shows was rounded)."""
    value = record.get(key)
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif insights and isinstance(value, str) and _WHOLE.fullmatch(value.strip()):
        number = int(value)
    if number is None:
        raise _Unreadable(f"{key} {value!r} is not a whole number")
    if insights and number > INSIGHTS_EXACT:
        raise _Unreadable(
            f"{key} {number} is above 2^53, where Logs Insights' numbers are not exact: "
            "read these records with aws logs filter-log-events instead"
        )
    return number
