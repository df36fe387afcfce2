"""Several dev servers (as several Lambda containers would be) sharing one
embedded DynamoDB, optionally behind a fault-injecting proxy."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import requests

from devserver.process import DevServer
from localrun.dynamodb import EmbeddedDynamoDB
from localrun.environment import scrubbed_environment
from localrun.template import ROOT
from tests.support.fault_proxy import FaultProxy
from tests.support.hammer import merge


@dataclass
class Cluster:
    dynamodb: EmbeddedDynamoDB
    proxy: FaultProxy | None
    servers: list[DevServer]

    @property
    def urls(self) -> list[str]:
        return [server.url for server in self.servers]

    def high_water(self, counter: str) -> int:
        """The counter's last ID handed out, read with faults paused: this is
        the test looking, not the system under test."""
        paused = self.proxy is not None and self.proxy.enabled
        if paused:
            self.proxy.enabled = False
        try:
            reply = requests.get(f"{self.urls[0]}/admin/counters/{counter}", timeout=30)
        finally:
            if paused:
                self.proxy.enabled = True
        assert reply.status_code == 200, reply.text
        return reply.json()["next"] - 1


@contextlib.contextmanager
def cluster(
    servers: int = 2,
    faults: dict[str, float] | None = None,
    seed: int = 1,
    item_write_limit: int | None = None,
    server_args: tuple[str, ...] = (),
) -> Iterator[Cluster]:
    """``item_write_limit``: writes/s per item the shared DynamoDB takes once
    the servers are up (None: no limit); ``server_args``: more flags for
    every dev server."""
    dynamodb = EmbeddedDynamoDB().start()
    proxy = FaultProxy(dynamodb.endpoint, rates=faults, seed=seed) if faults is not None else None
    endpoint = dynamodb.endpoint
    if proxy is not None:
        proxy.__enter__()
        proxy.enabled = False  # not while the servers start and create tables
        endpoint = proxy.url
    started = [DevServer("--dynamodb-endpoint", endpoint, *server_args) for _ in range(servers)]
    threads = [threading.Thread(target=server.start) for server in started]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert all(server.url for server in started), "a dev server did not start"
        dynamodb.limit_item_writes(item_write_limit)
        if proxy is not None:
            proxy.enabled = True
        yield Cluster(dynamodb, proxy, started)
    finally:
        if proxy is not None:
            proxy.enabled = False
        # An ExitStack runs every stop even if one raises, so no server outlives the test.
        with contextlib.ExitStack() as stops:
            stops.callback(dynamodb.stop)
            if proxy is not None:
                stops.callback(proxy.__exit__)
            for server in started:
                if server.process is not None:
                    stops.callback(server.stop)  # SIGTERM, then SIGKILL after a bounded wait


def hammer(
    urls: list[str], counters: list[str], out_dir: Path, *, processes: int, seed: int, **options: object
) -> dict:
    """Run client processes (tests/support/hammer.py) and merge what they saw."""
    env = scrubbed_environment()
    # options become flags: requests=20 -> --requests=20; flag="" -> --flag
    args = [f"--{k.replace('_', '-')}" + (f"={v}" if v != "" else "") for k, v in options.items()]
    outs = [out_dir / f"hammer-{seed}-{p}.json" for p in range(processes)]
    base = [sys.executable, "-m", "tests.support.hammer", f"--urls={','.join(urls)}"]
    base += [f"--counters={','.join(counters)}", *args]
    workers = [
        subprocess.Popen([*base, f"--seed={seed * 100 + p}", f"--out={out}"], cwd=ROOT, env=env)
        for p, out in enumerate(outs)
    ]
    for worker in workers:
        assert worker.wait(timeout=900) == 0
    merged = merge([json.loads(out.read_text()) for out in outs])
    merged["allocations"] = [tuple(a) for a in merged["allocations"]]
    return merged
