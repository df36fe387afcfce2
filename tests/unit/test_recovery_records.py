"""Reading allocation records for `idblocks recover` (idblocks.records), in
each shape a user has them: the dev server's --records output, what `aws
logs filter-log-events` prints (JSON, pages put together, compacted, or
--output text), and Logs Insights exports (get-query-results, the console's
CSV and JSON). The shapes are written here as those tools print them (the
AWS CLI's JSON is indented by four spaces; its text output is tab-separated,
an event's columns in the order of their names)."""

from __future__ import annotations

import csv
import io
import json
import os
import threading
from pathlib import Path

import pytest

from idblocks import records
from idblocks.records import INSIGHTS_EXACT, RecordsError, read_records


def record(counter: str, first: int, last: int, step: int = 1, **more) -> dict:
    """An allocation record as the functions log it (a trimmed Powertools line)."""
    return {
        "level": "INFO",
        "location": "_record:226",
        "message": "allocation",
        "timestamp": "2026-11-29 01:33:00,940+0000",
        "service": "idblocks",
        "counter": counter,
        "first_id": first,
        "last_id": last,
        "count": (last - first) // step + 1 if type(first) is type(last) is int else 1,
        "step": step,
        "route": "batch",
        "caller": "anonymous",
        "idempotency_key": "",
        "replayed": False,
        "served_from": "write",
        **more,
    }


def line(value: dict) -> str:
    return json.dumps(value, separators=(",", ":"))


def event(message: str, n: int) -> dict:
    return {
        "logStreamName": "2026/11/29/[live]abc",
        "timestamp": 1795915880000 + n,
        "message": message + "\n",
        "ingestionTime": 1795915881066 + n,
        "eventId": str(n),
    }


def page(messages: list[str], next_token: str | None = None) -> dict:
    shown: dict = {"events": [event(m, n) for n, m in enumerate(messages)], "searchedLogStreams": []}
    if next_token:
        shown["nextToken"] = next_token
    return shown


def printed(value) -> str:
    """As the AWS CLI prints JSON."""
    return json.dumps(value, indent=4) + "\n"


def write(tmp_path: Path, text: str, name: str = "records") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


OTHER_LINES = [
    "START RequestId: 0e1c Version: 7",
    line({"level": "WARNING", "message": "possible gap: unanswered attempts", "counter": "orders", "ids": 5}),
    "END RequestId: 0e1c",
    "REPORT RequestId: 0e1c\tDuration: 4.2 ms\tBilled Duration: 5 ms",
]


def test_the_dev_servers_records_output_gives_each_counters_highest_id(tmp_path):
    # Given the dev server's console with --records: its banner, a line per
    # request, and each request's allocation record
    text = "\n".join(
        [
            "idblocks dev server",
            "  API       http://127.0.0.1:3000   (routes and events: SAM CLI, from template.yaml)",
            "ready: http://127.0.0.1:3000   (Ctrl-C stops)",
            line(record("orders", 1, 1)),
            "01:33:00 POST /counters/orders/next -> NextFunction 200 (183.8 ms) bbea8fbf",
            line(record("orders", 2, 40)),
            line(record("invoices", 1001, 1005)),
            line(record("orders", 3, 3, replayed=True, served_from="idempotency_record")),
            "01:33:01 POST /counters/orders/batch -> BatchFunction 200 (27.7 ms) ff538ce5",
            "idblocks dev server stopped",
        ]
    )
    # When it is read
    found = read_records([write(tmp_path, text)])
    # Then each counter's highest last_id, every record counted, the rest skipped
    assert found.highest == {"orders": 40, "invoices": 1005}
    assert (found.records, found.skipped) == (4, 6)


def test_filter_log_events_json_pages_put_together(tmp_path):
    # Given two pages as `aws logs filter-log-events --no-paginate` prints
    # them, the first saying more follow, concatenated into one file
    first = page([line(record("orders", 1, 10)), *OTHER_LINES], next_token="f/123")
    last = page([line(record("orders", 11, 20, step=3)), line(record("members", 5, 9))])
    # When read
    found = read_records([write(tmp_path, printed(first) + printed(last))])
    # Then every record of both pages counts, and Lambda's own lines are skipped
    assert found.highest == {"orders": 20, "members": 9}
    assert (found.records, found.skipped) == (3, 4)


def test_filter_log_events_compacted_a_page_a_line(tmp_path):
    pages = [page([line(record("orders", n * 10 + 1, n * 10 + 10))]) for n in range(3)]
    text = "".join(json.dumps(p) + "\n" for p in pages)
    assert read_records([write(tmp_path, text)]).highest == {"orders": 30}


def test_filter_log_events_output_text(tmp_path):
    # Given --output text: EVENTS, eventId, ingestionTime, logStreamName,
    # message, timestamp, tab-separated (a message with a tab of its own
    # spreads over more columns)
    rows = [
        ["EVENTS", "0", "1795915881066", "s", line(record("orders", 1, 77)), "1795915880000"],
        ["EVENTS", "1", "1795915881066", "s", "REPORT RequestId: abc", "Duration: 4 ms", "1795915880000"],
    ]
    text = "".join("\t".join(row) + "\n" for row in rows) + "SEARCHEDLOGSTREAMS\ts\tTrue\n"
    found = read_records([write(tmp_path, text)])
    assert (found.highest, found.records, found.skipped) == ({"orders": 77}, 1, 2)


def test_a_page_that_says_more_follow_and_is_last_is_refused(tmp_path):
    """Its missing pages could hold the highest IDs."""
    text = printed(page([line(record("orders", 1, 10))], next_token="f/123"))
    with pytest.raises(RecordsError, match="more follow"):
        read_records([write(tmp_path, text)])


def insights_row(**fields) -> list[dict]:
    return [{"field": key, "value": str(value)} for key, value in fields.items()] + [
        {"field": "@ptr", "value": "CmAKJwoj"}
    ]


SAVED_QUERY_FIELDS = {
    "@timestamp": "2026-11-29 01:33:00.940",
    "route": "batch",
    "caller": "anonymous",
    "idempotency_key": "",
    "replayed": "0",
    "served_from": "write",
}


def query_results(rows: list[list[dict]], status: str = "Complete", next_token: str | None = None) -> dict:
    shown = {
        "results": rows,
        "statistics": {"recordsMatched": float(len(rows)), "recordsScanned": 100.0, "bytesScanned": 9e3},
        "status": status,
    }
    if next_token:
        shown["nextToken"] = next_token
    return shown


def test_get_query_results_of_the_saved_querys_fields(tmp_path):
    # Given what `aws logs get-query-results` prints for the saved query (its
    # counter and ID filters left out): every value as text
    rows = [
        insights_row(**SAVED_QUERY_FIELDS, counter="orders", first_id=1, last_id=5, step=1),
        insights_row(**SAVED_QUERY_FIELDS, counter="orders", first_id=6, last_id=900, step=1),
        insights_row(**SAVED_QUERY_FIELDS, counter="stepped", first_id=4, last_id=10, step=3),
        insights_row(**{"@timestamp": "2026-11-29 01:33:00.940"}),
    ]
    found = read_records([write(tmp_path, printed(query_results(rows)))])
    assert found.highest == {"orders": 900, "stepped": 10}
    assert (found.records, found.skipped) == (3, 1)


def test_get_query_results_of_message(tmp_path):
    """`fields @message`: each row the line as written, its numbers exact."""
    big = 2**60
    rows = [insights_row(**{"@message": line(record("orders", big, big + 4))})]
    assert read_records([write(tmp_path, printed(query_results(rows)))]).highest == {"orders": big + 4}


def test_results_of_a_query_still_running_are_refused(tmp_path):
    rows = [insights_row(counter="orders", first_id=1, last_id=5)]
    with pytest.raises(RecordsError, match="'Running', not Complete"):
        read_records([write(tmp_path, printed(query_results(rows, status="Running")))])


def test_query_result_pages_must_end_with_the_last(tmp_path):
    first = query_results([insights_row(counter="orders", first_id=1, last_id=5)], next_token="q/1")
    last = query_results([insights_row(counter="orders", first_id=6, last_id=8)])
    path = write(tmp_path, printed(first))
    with pytest.raises(RecordsError, match="more follow"):
        read_records([path])
    assert read_records([write(tmp_path, printed(first) + printed(last), "all")]).highest == {"orders": 8}


@pytest.fixture
def insights_rows_at_most_10(monkeypatch):
    """Logs Insights' 10,000 rows, as 10: the same rule, read in a tenth of the time."""
    assert records.INSIGHTS_ROWS == 10_000
    monkeypatch.setattr(records, "INSIGHTS_ROWS", 10)


def test_insights_results_of_a_multiple_of_10000_rows_are_refused_as_maybe_cut_short(
    tmp_path, insights_rows_at_most_10
):
    rows = [insights_row(counter="orders", first_id=n, last_id=n) for n in range(1, 21)]
    with pytest.raises(RecordsError, match="hold 20 rows, a multiple of the 10"):
        read_records([write(tmp_path, printed(query_results(rows)))])
    assert read_records([write(tmp_path, printed(query_results(rows[:-1])), "fewer")]).records == 19
    pages = printed(query_results(rows[:10], next_token="q/1")) + printed(query_results(rows[10:]))
    with pytest.raises(RecordsError, match="hold 20 rows"):
        read_records([write(tmp_path, pages, "pages")])


def console_csv(rows: list[dict]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def saved_query_row(counter: str, first: int, last: int, step: int = 1) -> dict:
    return SAVED_QUERY_FIELDS | {"counter": counter, "first_id": first, "last_id": last, "step": step}


def test_the_consoles_csv_download(tmp_path):
    rows = [saved_query_row("orders", 1, 5), saved_query_row("orders", 6, 60), saved_query_row("b", 2, 2)]
    rows[1]["idempotency_key"] = 'key, with "quotes"\nand a line'
    found = read_records([write(tmp_path, console_csv(rows))])
    assert (found.highest, found.records) == ({"orders": 60, "b": 2}, 3)


def test_the_consoles_csv_download_of_message(tmp_path):
    """`fields @timestamp, @message`: the line as written, quoted as CSV quotes it."""
    rows = [
        {"@timestamp": "2026-11-29 01:33:00.940", "@message": line(record("orders", 1, 2**60))},
        {"@timestamp": "2026-11-29 01:33:01.000", "@message": "END RequestId: 0e1c"},
    ]
    found = read_records([write(tmp_path, console_csv(rows))])
    assert (found.highest, found.records, found.skipped) == ({"orders": 2**60}, 1, 1)


def test_the_consoles_downloads_of_10000_rows_are_refused(tmp_path, insights_rows_at_most_10):
    rows = [saved_query_row("orders", n, n) for n in range(1, 11)]
    with pytest.raises(RecordsError, match="hold 10 rows"):
        read_records([write(tmp_path, console_csv(rows))])
    with pytest.raises(RecordsError, match="hold 10 rows"):
        read_records([write(tmp_path, json.dumps(rows), "json")])


def test_the_consoles_json_download(tmp_path):
    # Given "Download table (JSON)": an array of rows, a row an object of the
    # query's fields (text or numbers), @message as text or as the object
    # the console made of it
    rows = [
        saved_query_row("orders", 1, 5),
        {"@timestamp": "2026-11-29 01:33:01.000", "counter": "orders", "first_id": 6, "last_id": 70},
        {"@timestamp": "2026-11-29 01:33:02.000", "@message": record("members", 3, 4)},
        {"@timestamp": "2026-11-29 01:33:03.000", "@message": line(record("members", 5, 8))},
        {"@timestamp": "2026-11-29 01:33:04.000", "@message": "INIT_START Runtime Version: python:3.13"},
    ]
    found = read_records([write(tmp_path, json.dumps(rows, indent=2))])
    assert (found.highest, found.records, found.skipped) == ({"orders": 70, "members": 8}, 4, 1)


def test_garbage_is_skipped_and_counted(tmp_path):
    text = "\n".join(
        [
            "{not json at all",
            "[1, 2",
            "\x00\x01 binary",
            line(record("orders", 1, 3)),
            json.dumps({"message": "allocation"})[:-3],  # cut short: never JSON
            "[]",
            "{}",
            line({"counter": "orders", "last_id": 99}),  # not a record: not the functions' line
        ]
    )
    found = read_records([write(tmp_path, text)])
    assert (found.highest, found.records, found.skipped) == ({"orders": 3}, 1, 7)


def test_a_file_with_no_record_is_an_error(tmp_path):
    path = write(tmp_path, "\n".join(OTHER_LINES))
    with pytest.raises(RecordsError, match="holds no allocation record"):
        read_records([path])
    with pytest.raises(RecordsError, match="holds no allocation record"):
        read_records([write(tmp_path, "", "empty")])


def test_every_file_must_hold_a_record(tmp_path):
    good = write(tmp_path, line(record("orders", 1, 3)), "good")
    with pytest.raises(RecordsError, match=r"other\.json holds no allocation record"):
        read_records([good, write(tmp_path, printed(page(OTHER_LINES)), "other.json")])


def test_a_document_cut_short_is_an_error_naming_where(tmp_path):
    """A download cut off mid-page: what is missing could hold the highest IDs."""
    text = printed(page([line(record("orders", n, n)) for n in range(1, 50)]))
    with pytest.raises(RecordsError, match=r"line 1: the JSON that starts there is broken at line \d+"):
        read_records([write(tmp_path, text[: len(text) // 2])])


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        (record("a b", 1, 3), "not a counter name"),
        (record("orders", 1, "3"), "last_id '3' is not a whole number"),
        (record("orders", 1, 3.0), "last_id 3.0 is not a whole number"),
        (record("orders", 1, True), "last_id True is not a whole number"),
        (record("orders", 5, 3), "not a block of IDs"),
        (record("orders", 0, 3), "not a block of IDs"),
        (record("orders", 1, 2**63), "not a block of IDs"),
        ({**record("orders", 1, 3), "last_id": None}, "last_id None is not a whole number"),
    ],
)
def test_a_record_that_cannot_be_read_exactly_stops_the_reading(tmp_path, bad, why):
    """Skipped, its IDs would be handed out again."""
    text = line(record("orders", 1, 3)) + "\n" + line(bad) + "\n"
    cannot = "line 2: an allocation record that cannot be read exactly"
    with pytest.raises(RecordsError, match=f"{cannot}.*{why}"):
        read_records([write(tmp_path, text)])


def test_an_insights_number_above_2_53_is_refused(tmp_path):
    """Logs Insights carries numbers as doubles: what it shows of a larger one
    may have been rounded down."""
    exact = insights_row(counter="orders", first_id=1, last_id=INSIGHTS_EXACT)
    rounded = insights_row(counter="orders", first_id=1, last_id=INSIGHTS_EXACT + 2)
    found = read_records([write(tmp_path, printed(query_results([exact])))])
    assert found.highest["orders"] == INSIGHTS_EXACT
    with pytest.raises(RecordsError, match="above 2\\^53"):
        read_records([write(tmp_path, printed(query_results([exact, rounded])), "rounded")])
    console = [{"counter": "orders", "first_id": 1, "last_id": INSIGHTS_EXACT + 2}]
    with pytest.raises(RecordsError, match="above 2\\^53"):
        read_records([write(tmp_path, json.dumps(console), "console")])


def test_records_past_a_chunk_and_a_long_message_are_read_whole(tmp_path):
    """The file is read 64 KiB at a time: values that straddle a chunk, and
    one longer than a chunk, read as they are."""
    messages = [line(record("orders", n, n, padding="x" * (n % 700))) for n in range(1, 800)]
    messages.append(line(record("orders", 5000, 5000, padding="y" * 200_000)))
    found = read_records([write(tmp_path, printed(page(messages)))])
    assert (found.highest, found.records) == ({"orders": 5000}, 800)


def test_a_compacted_page_longer_than_a_line_may_be_is_read_as_it_streams(tmp_path, monkeypatch):
    """A line is read whole up to VALUE_LIMIT; a longer one, a page compacted
    onto one line, is read a value at a time, as a document printed over
    many lines is."""
    monkeypatch.setattr(records, "VALUE_LIMIT", 20_000)
    messages = [line(record("orders", n, n, padding="z" * 100)) for n in range(1, 400)]
    text = json.dumps(page(messages)) + "\n" + line(record("orders", 400, 400)) + "\n"
    assert len(text) > 5 * records.VALUE_LIMIT
    found = read_records([write(tmp_path, text)])
    assert (found.highest, found.records) == ({"orders": 400}, 400)


def test_a_file_over_the_limit_is_refused_before_it_is_read(tmp_path, monkeypatch):
    path = write(tmp_path, line(record("orders", 1, 3)) * 10)

    def never(*_args, **_kwargs):
        raise AssertionError("the file was opened")

    monkeypatch.setattr(records, "open", never, raising=False)
    size = os.path.getsize(path)
    with pytest.raises(RecordsError, match=f"is {size:,} bytes, over the 600 one file may hold"):
        read_records([path], limit=600)


def test_a_stream_over_the_limit_is_refused_once_it_passes_it():
    """A pipe says no size: it is read until it passes the limit."""
    read_end, write_end = os.pipe()

    def feed() -> None:
        with os.fdopen(write_end, "w") as out:
            for n in range(1, 200):
                out.write(line(record("orders", n, n)) + "\n")

    writer = threading.Thread(target=feed)
    writer.start()
    try:
        with pytest.raises(RecordsError, match="holds more than the 4,096 bytes"):
            read_records([f"/dev/fd/{read_end}"], limit=4096)
    finally:
        writer.join(timeout=10)
        os.close(read_end)


def test_a_file_that_cannot_be_opened_is_an_error(tmp_path):
    with pytest.raises(RecordsError, match="cannot read"):
        read_records([str(tmp_path / "missing")])
    with pytest.raises(RecordsError, match="cannot read"):
        read_records([str(tmp_path)])
