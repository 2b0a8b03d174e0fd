"""Real Prometheus-side peers for tests/peers: find the Debian binaries, start them on a free loopback port.

A missing tool skips its test with the reason, unless ``RCAWEB_REQUIRE_PEERS=1`` (CI's first pass sets it),
where a missing tool fails the test: CI must never pass by skipping the peers.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

PACKAGES = {
    "promtool": "prometheus",
    "prometheus": "prometheus",
    "prometheus-alertmanager": "prometheus-alertmanager",
    "amtool": "prometheus-alertmanager",
}
STARTUP_S = 60.0  # how long a peer may take to become ready before the test fails (not a speed assert)


def need(tool: str) -> str:
    """The path of ``tool``; skip (or, with RCAWEB_REQUIRE_PEERS=1, fail) when it is not installed."""
    found = shutil.which(tool) or next(
        (p for p in (f"/usr/bin/{tool}", f"/usr/sbin/{tool}") if os.access(p, os.X_OK)), None
    )
    if found:
        return found
    why = f"{tool} is not installed (Debian package {PACKAGES.get(tool, tool)})"
    if os.environ.get("RCAWEB_REQUIRE_PEERS") == "1":
        pytest.fail(f"{why}; RCAWEB_REQUIRE_PEERS=1 requires the real peers")
    pytest.skip(why)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url: str, timeout: float = 10.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read())


def wait_for(
    what: str, check: Callable[[], bool], proc: subprocess.Popen, log: Path, limit_s: float = STARTUP_S
) -> None:
    """Poll ``check`` until it holds; fail naming ``what`` (with the peer's log) if the peer exits or never gets there."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"{what}: the process exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if check():
                return
        except (OSError, urllib.error.URLError, ValueError, KeyError):
            pass
        time.sleep(0.25)
    pytest.fail(f"{what}: not reached within {limit_s:.0f} s:\n{log.read_text()[-3000:]}")


@contextmanager
def running(argv: list[str], log: Path) -> Iterator[subprocess.Popen]:
    """Run a peer for the block; it is stopped (SIGTERM, then SIGKILL) by its own pid when the block ends."""
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


@dataclass
class Peer:
    url: str
    proc: subprocess.Popen
    log: Path

    def wait(self, what: str, check: Callable[[], bool], limit_s: float = STARTUP_S) -> None:
        wait_for(what, check, self.proc, self.log, limit_s)


@contextmanager
def prometheus(config: Path, workdir: Path, extra: Sequence[str] = ()) -> Iterator[Peer]:
    """A real Prometheus with ``config``, its TSDB in ``workdir``, on a free port, once ready."""
    binary = need("prometheus")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = [
        binary,
        f"--config.file={config}",
        f"--storage.tsdb.path={workdir / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--web.enable-lifecycle",
        *extra,
    ]
    log = workdir / "prometheus.log"
    with running(argv, log) as proc:
        peer = Peer(url, proc, log)
        peer.wait(
            "prometheus ready", lambda: urllib.request.urlopen(f"{url}/-/ready", timeout=2).status == 200
        )
        yield peer
