"""RunaiSource against the simulator's Run:ai API, and the audit log naming who changed a project."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from collectors.models import Change, SourceRun
from collectors.sources.errors import SourceError
from collectors.sources.runai import RunaiSource, runai_enabled
from collectors.sweep import sweep_cluster
from tests.collectors.faultserver import fault_server
from tests.collectors.simhelpers import register, served, small_world


@pytest.fixture(scope="module")
def sim():
    world = small_world("kai")
    with served(world) as server:
        server.advance_to(world.start + timedelta(minutes=70))
        yield server


def test_it_lists_projects_node_pools_workloads_and_the_audit_log(sim):
    src = RunaiSource(sim.runai_url, token=sim.runai_token, timeout=5)
    projects = {p["name"]: p for p in src.projects()}
    assert projects["vision"]["resources"][0]["gpu"]["deserved"] == 8
    assert {p["name"] for p in src.node_pools()} >= {"h100"}
    assert {w["name"] for w in src.workloads()} >= {"resnet-train", "big"}
    logs = src.audit_log(sim.world.start, sim.world.now)
    assert any(e["entityName"] == "vision" and e["subject"] == "platform-admin" for e in logs)


def test_it_names_a_wrong_token():
    with fault_server(faults={"/api/v1/": "401"}) as srv, pytest.raises(SourceError, match="unauthorized"):
        RunaiSource(srv.url, token="nope", timeout=2).projects()


def test_it_is_off_unless_enabled(settings):
    settings.RCAWEB_RUNAI_ENABLED = False
    assert not runai_enabled("http://runai")
    settings.RCAWEB_RUNAI_ENABLED = True
    assert runai_enabled("http://runai") and not runai_enabled("")


@pytest.mark.django_db
def test_the_audit_user_is_the_actor_of_a_project_change(settings):
    settings.RCAWEB_RUNAI_ENABLED = True
    settings.RCAWEB_RUNAI_TOKEN = "sim-runai-token"
    world = small_world("kai")
    audit = {
        "logs": [
            {
                "id": "1",
                "timestamp": "2026-11-29T01:00:00Z",
                "subject": "jane@example.org",
                "subjectType": "User",
                "action": "Update",
                "httpMethod": "PUT",
                "entityType": "project",
                "entityId": "p1",
                "entityName": "vision",
                "success": True,
                "details": {"field": "quota", "old": 16, "new": 8},
            }
        ],
        "total": 1,
    }
    with (
        served(world) as sim,
        fault_server(bodies={"/api/v1/audit/log": json.dumps(audit).encode()}) as runai,
    ):
        cluster = register(sim, runai_url=runai.url)
        for minutes in (50, 70):
            sim.advance_to(world.start + timedelta(minutes=minutes))
            sweep_cluster(cluster.name, world.now)
    change = Change.objects.get(entity__kind="project", entity__name="vision", field="quota_gpus")
    assert (change.old, change.new, change.actor) == (16, 8, "jane@example.org")
    assert SourceRun.objects.filter(cluster=cluster, source="runai", call="audit log", ok=True).count() == 2
