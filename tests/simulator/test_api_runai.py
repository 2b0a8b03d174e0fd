"""The simulator's Run:ai REST API subset: bearer token, projects with quota, workloads, audit log."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from simulator.server import SimServer
from tests.simulator.test_api_kube import SmallWorld


def get(sim: SimServer, path: str, token: str | None = None) -> tuple[int, Any]:
    req = urllib.request.Request(
        sim.runai_url + path, headers={"Authorization": f"Bearer {token or sim.runai_token}"}
    )
    try:
        with urllib.request.urlopen(req) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_it_serves_projects_workloads_and_the_audit_log() -> None:
    with SimServer(SmallWorld()) as sim:
        _, body = get(sim, "/api/v1/org-unit/projects")
        (project,) = body["projects"]
        assert project["name"] == "vision" and project["resources"][0]["gpu"]["deserved"] == 8
        assert project["updatedBy"] == "platform-admin"
        _, body = get(sim, "/api/v1/workloads?filterBy=phase==Pending")
        assert [w["name"] for w in body["workloads"]] == ["resnet-train"]
        _, body = get(sim, "/api/v1/audit/log")
        (entry,) = body["logs"]
        assert (entry["subject"], entry["entityName"], entry["details"]) == (
            "platform-admin",
            "vision",
            {"field": "quota", "old": 16, "new": 8},
        )


def test_it_refuses_a_wrong_token_and_writes() -> None:
    with SimServer(SmallWorld()) as sim:
        assert get(sim, "/api/v1/org-unit/projects", token="nope")[0] == 401
        req = urllib.request.Request(
            sim.runai_url + "/api/v1/org-unit/projects",
            data=b"{}",
            method="POST",
            headers={"Authorization": f"Bearer {sim.runai_token}"},
        )
        try:
            urllib.request.urlopen(req)
            raise AssertionError("POST was accepted")
        except urllib.error.HTTPError as exc:
            assert exc.code == 405
