"""The parallel suite's wiring (tests/conftest.py): serial groups and one Redis database per worker."""

from __future__ import annotations

import pytest

from tests.conftest import MODULE_GROUPS, SERIAL_GROUPS, worker_redis_url, xdist_group_of


def test_each_worker_gets_its_own_redis_database() -> None:
    assert worker_redis_url("redis://127.0.0.1:6379/0", "gw0") == "redis://127.0.0.1:6379/1"
    assert worker_redis_url("redis://127.0.0.1:6379/0", "gw1") == "redis://127.0.0.1:6379/2"
    assert worker_redis_url("redis://:secret@redis:6379/0", "gw2") == "redis://:secret@redis:6379/3"
    assert worker_redis_url("redis://127.0.0.1:6379/0", None) == "redis://127.0.0.1:6379/0"
    assert worker_redis_url("", "gw0") == ""


def scheduled_group(request: pytest.FixtureRequest) -> str | None:
    """The group xdist's scheduler sees: the ``@group`` suffix its worker puts on the node id under
    ``--dist loadgroup``. The mark alone is not enough: a mark added after xdist's worker read the marks
    groups nothing (every test is then a unit of its own). Without xdist (``-n 0``) the mark is all there is."""
    group = request.node.get_closest_marker("xdist_group")
    if getattr(request.config, "workerinput", None) is not None and request.config.getvalue("loadgroup"):
        nodeid = request.node.nodeid
        return nodeid.rsplit("@", 1)[1] if nodeid.rfind("@") > nodeid.rfind("]") else None
    return str(group.args[0]) if group is not None else None


@pytest.mark.e2e
def test_an_e2e_test_lands_in_the_e2e_group(request: pytest.FixtureRequest) -> None:
    group = request.node.get_closest_marker("xdist_group")
    assert group is not None and group.args == ("e2e",)
    assert scheduled_group(request) == "e2e"


@pytest.mark.services
def test_a_services_test_lands_in_the_services_group(request: pytest.FixtureRequest) -> None:
    group = request.node.get_closest_marker("xdist_group")
    assert group is not None and group.args == ("services",)
    assert scheduled_group(request) == "services"


def test_other_tests_are_spread_over_the_workers(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("xdist_group") is None
    assert scheduled_group(request) is None
    assert set(SERIAL_GROUPS) == {"e2e", "services"}


def test_a_module_waiting_on_a_real_peer_is_one_group_and_its_neighbours_are_not() -> None:
    assert MODULE_GROUPS == ("tests/peers/test_prometheus.py",)
    prom = "tests/peers/test_prometheus.py::test_real_prometheus_answers_as_the_simulator_does[up]"
    assert xdist_group_of(prom, {"peers", "parametrize"}) == "tests/peers/test_prometheus.py"
    assert xdist_group_of("tests/peers/test_kubectl.py::test_get_events", {"peers"}) is None
    assert xdist_group_of("tests/e2e/test_busy.py::test_x", {"e2e"}) == "e2e"  # a serial group comes first
    assert xdist_group_of("tests/test_deploy.py::test_x", set()) is None


@pytest.mark.peers
def test_a_peers_test_of_another_module_is_spread(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("xdist_group") is None
