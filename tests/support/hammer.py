"""One load-generating client process for the proof suites.

THREADS threads each send REQUESTS allocation requests (a mix of next and
batch with random counts) to random COUNTERS on the given dev servers, some
with an Idempotency-Key and some repeated with the same key. Failed requests
(503, or 409 while a duplicate is in progress) are retried, honouring
Retry-After, a bounded number of times. Every response is checked for shape;
the outcome is written as JSON to OUT.

    python -m tests.support.hammer --urls U1,U2 --counters a,b --threads 8 --requests 30 --seed 1 --out F
"""

from __future__ import annotations

import argparse
import json
import random
import threading
import time
import uuid
from typing import Any

import requests

RETRYABLE = {503, 429}


def new_log() -> dict[str, Any]:
    return {"allocations": [], "statuses": {}, "problems": []}


def merge(logs: list[dict[str, Any]]) -> dict[str, Any]:
    """One log of what several threads (or processes) saw."""
    merged = new_log()
    for part in logs:
        merged["allocations"] += part["allocations"]
        merged["problems"] += part["problems"]
        for status, n in part["statuses"].items():
            merged["statuses"][status] = merged["statuses"].get(status, 0) + n
    return merged


def check_shape(response: requests.Response, problems: list[str]) -> dict[str, Any] | None:
    """A response the API may give: JSON, no-store, and errors in the error shape."""
    where = f"{response.request.method} {response.request.path_url} -> {response.status_code}"
    if response.headers.get("Cache-Control") != "no-store":
        problems.append(f"{where}: no Cache-Control: no-store")
    try:
        body = response.json()
    except ValueError:
        problems.append(f"{where}: body is not JSON: {response.text[:200]!r}")
        return None
    if "Traceback" in response.text:
        problems.append(f"{where}: a stack trace in the body")
    if response.status_code >= 400:
        error = body.get("error") if isinstance(body, dict) else None
        if not (isinstance(error, dict) and {"code", "message"} <= set(error)):
            problems.append(f"{where}: not an error body: {body}")
        if response.status_code >= 500 and response.status_code != 503:
            problems.append(f"{where}: a server error other than 503: {body}")
        if response.status_code == 503 and not response.headers.get("Retry-After"):
            problems.append(f"{where}: 503 without Retry-After")
    return body


def send(session: requests.Session, url: str, body: dict | None, key: str | None, log: dict) -> dict | None:
    headers = {"Idempotency-Key": key} if key else {}
    for _ in range(60):
        try:
            response = session.post(url, json=body, headers=headers, timeout=30)
        except requests.ConnectionError as exc:
            log["problems"].append(f"POST {url}: connection error {exc}")
            return None
        log["statuses"][str(response.status_code)] = log["statuses"].get(str(response.status_code), 0) + 1
        payload = check_shape(response, log["problems"])
        retry = response.status_code in RETRYABLE or (
            response.status_code == 409
            and (payload or {}).get("error", {}).get("code") == "request_in_progress"
        )
        if not retry:
            return payload if response.status_code == 200 else None
        wait = float(response.headers.get("Retry-After") or 0.1)
        time.sleep(min(wait, 2.0) * random.uniform(0.5, 1.0))
    log["problems"].append(f"POST {url}: still failing after 60 attempts")
    return None


def worker(args: argparse.Namespace, slot: int, log: dict) -> None:
    rng = random.Random(args.seed * 1000 + slot)
    session = requests.Session()
    urls = args.urls.split(",")
    counters = args.counters.split(",")
    for _ in range(args.requests):
        base = rng.choice(urls)
        counter = counters[slot % len(counters)] if args.counter_per_thread else rng.choice(counters)
        key = uuid.uuid4().hex if rng.random() < args.key_rate else None
        if rng.random() < args.next_rate:
            url, body = f"{base}/counters/{counter}/next", None
        else:
            url, body = f"{base}/counters/{counter}/batch", {"count": rng.randint(1, args.max_count)}
        payload = send(session, url, body, key, log)
        if payload is None:
            continue
        start = payload.get("id", payload.get("start"))
        end = payload.get("id", payload.get("end"))
        log["allocations"].append([counter, start, end, key])
        if key and rng.random() < args.repeat_rate:
            again = send(session, rng.choice(urls) + url[len(base) :], body, key, log)
            if again != payload:
                log["problems"].append(f"repeat with key {key} answered {again}, first {payload}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--urls", required=True)
    parser.add_argument("--counters", required=True)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--next-rate", type=float, default=0.3)
    parser.add_argument("--max-count", type=int, default=200)
    parser.add_argument("--key-rate", type=float, default=0.3)
    parser.add_argument("--repeat-rate", type=float, default=0.3)
    parser.add_argument("--counter-per-thread", action="store_true", help="thread i uses only counter i")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    logs = [new_log() for _ in range(args.threads)]
    threads = [threading.Thread(target=worker, args=(args, i, logs[i])) for i in range(args.threads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with open(args.out, "w") as out:
        json.dump(merge(logs), out)


if __name__ == "__main__":
    main()
