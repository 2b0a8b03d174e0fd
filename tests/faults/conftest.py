"""Fixtures for the fault tests: a private Redis, subprocesses killed before the test database is flushed.

Every fixture here depends on ``transactional_db``: the worker and gunicorn subprocesses must see what the
test commits, and pytest tears these fixtures down (killing the processes) before it flushes the tables.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection

from tests.faults.services import Proc, RedisServer


@pytest.fixture
def postgres(transactional_db: None) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("the fault tests need PostgreSQL (DATABASE_URL=postgres://…)")


@pytest.fixture
def redis_server(postgres: None, tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path).start()
    yield server
    server.stop()


class Procs(list[Proc]):
    """Processes started by one test; all are SIGKILLed at teardown and their logs printed (shown on failure)."""

    def add(self, proc: Proc) -> Proc:
        self.append(proc)
        return proc


@pytest.fixture
def procs(postgres: None, tmp_path: Path) -> Iterator[Procs]:
    started = Procs()
    yield started
    for p in started:
        p.kill()
        print(f"----- {p.name} (pid {p.pid}) -----\n{p.output()[-4000:]}")
