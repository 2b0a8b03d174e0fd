"""Suite-wide wiring for running the tests in parallel (pytest-xdist, ``make test`` runs ``-n auto``).

What may not run side by side is put in one ``xdist_group`` (``--dist loadgroup`` sends a group to a single
worker, in order), everything else is spread over the workers:

- ``e2e``: the browser tests share their servers and browser (a scenario run plus gunicorn, tens of
  seconds to build); in one group it is built once, not once per worker.
- ``services``: the real-worker and fault tests start Celery workers, gunicorn and Redis, cut PostgreSQL
  connections through a proxy and wait on wall-clock timeouts; one at a time they neither starve each
  other of the two cores nor race for the shared services.
- ``MODULE_GROUPS``: a module whose module-scoped fixture waits on a real peer (tests/peers/test_prometheus.py:
  a real Prometheus scraping the simulator until every target is scraped three times, ~10 s) is one group,
  so that fixture is built once rather than once on each worker its tests land on.

``--dist loadgroup`` hands out the largest groups first (pytest-xdist's ``--loadscope-reorder``, on by
default), so the long e2e group starts at once and the single tests fill in around it. The group reaches
the scheduler as a suffix of the node id (``test@e2e``): ``pytest_collection_modifyitems`` below sees to it.

Each worker has its own test database already (pytest-django suffixes PostgreSQL's ``test_…`` name with
the worker id; SQLite's test database is in memory). Redis is shared, so each worker gets its own Redis
database number: the sweep locks (``rcaweb:sweep:<kind>:<cluster>``) of two tests about the same cluster
name must not see each other.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

SERIAL_GROUPS = ("e2e", "services")
MODULE_GROUPS = ("tests/peers/test_prometheus.py",)


def xdist_group_of(nodeid: str, markers: set[str]) -> str | None:
    """The xdist group of a test with this node id and these marker names (None: a unit of its own)."""
    for group in SERIAL_GROUPS:
        if group in markers:
            return group
    module = nodeid.split("::", 1)[0]
    return module if module in MODULE_GROUPS else None


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> Iterator[None]:
    """Mark each test's group before xdist's worker reads the marks, then see that the group reached the node id.

    ``--dist loadgroup`` learns a test's group from its node id: xdist's worker appends ``@group`` to it in
    this same hook. Its hook has no order, so the marks must be on before it runs (this wrapper's first
    half). pytest 9.2 keeps the node id in a structured ``NodeId`` and xdist 3.8 still writes the old
    ``_nodeid`` attribute, which no longer changes the id (pytest-xdist issue 1386): every test was then a
    unit of its own, each worker built the e2e servers and the services tests ran side by side. So the
    second half appends the suffix itself where xdist's did not take (and does nothing once it does).
    """
    for item in items:
        group = xdist_group_of(item.nodeid, {m.name for m in item.iter_markers()})
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    result = yield
    if getattr(config.option, "loadgroup", False):
        for item in items:
            _suffix_group(item)
    return result


def _suffix_group(item: pytest.Item) -> None:
    """``path::test`` → ``path::test@group`` (xdist's suffix: its group names sorted, joined by ``_``)."""
    names = sorted(
        str(m.args[0] if m.args else m.kwargs.get("name", "default"))
        for m in item.iter_markers("xdist_group")
    )
    if not names:
        return
    suffix = "@" + "_".join(dict.fromkeys(names))
    if item.nodeid.endswith(suffix):
        return
    node_id = getattr(item, "_id", None)
    if node_id is None:  # pytest < 9.2: the id is a plain string
        item._nodeid = item.nodeid + suffix  # type: ignore[attr-defined]
    else:
        item._id = type(node_id).parse(item.nodeid + suffix)


def worker_redis_url(url: str, worker: str | None) -> str:
    """``redis://host:6379/0`` for worker ``gw3`` → ``redis://host:6379/4`` (no worker: unchanged)."""
    if not url or not worker or not worker.startswith("gw"):
        return url
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{1 + int(worker[2:]) % 15}"))


def pytest_configure(config: pytest.Config) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return
    from django.conf import settings

    if getattr(settings, "REDIS_URL", ""):
        settings.REDIS_URL = worker_redis_url(settings.REDIS_URL, worker)


@pytest.fixture
def scenario_db(transactional_db: None, tmp_path: Path) -> Iterator[None]:
    """The test database on a file, for a test that runs a scenario through the real pipeline (run_scenario).

    The simulation harness serves the webhook from threads that open database connections of their own
    (``harness.driver``, ``harness.webserver``), and refuses an in-memory SQLite database: other connections do
    not see it, or, in the suite's shared cache, fail at the first conflict ("table is locked"). So, on SQLite,
    the in-memory test database as it is now (migrated, empty) is copied to a file with the project's options
    and the default connection points there for the test; it is put back before pytest-django empties it.
    On PostgreSQL every thread reaches the test database already: nothing to do.
    """
    from django.db import connection, connections

    if connection.vendor != "sqlite" or not connection.is_in_memory_db():
        yield
        return
    suite = connections["default"]  # keeps the in-memory test database alive until it is put back
    saved = dict(connections.settings["default"])
    path = tmp_path / "scenario.sqlite3"
    suite.ensure_connection()
    target = sqlite3.connect(path)
    try:
        suite.connection.backup(target)
    finally:
        target.close()
    options = dict(saved.get("OPTIONS") or {})
    # A throw-away file: WAL as in production, no fsync per commit (as run_scenario's temporary database).
    options.update(
        timeout=20,
        transaction_mode="IMMEDIATE",
        init_command="PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF",
    )
    connections.settings["default"].update({"NAME": str(path), "OPTIONS": options})
    del connections["default"]
    try:
        yield
    finally:
        connections["default"].close()
        connections.settings["default"].clear()
        connections.settings["default"].update(saved)
        connections["default"] = suite
