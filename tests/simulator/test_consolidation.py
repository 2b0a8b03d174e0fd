"""KAI's consolidation in the simulator: a running preemptible job is moved, in the same pass, to make room."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import yaml

from simulator import World, load_scenario

CASE = Path(__file__).parent / "kai_cases" / "consol-01.yaml"


def world(text: str) -> World:
    w = World.from_scenario(load_scenario(text))
    w.advance_to(w.start + timedelta(minutes=1))
    return w


def nodes(w: World, job: str) -> list[str | None]:
    return [p.node for p in w.pods_of(w.jobs[job])]


def test_the_moved_job_is_placed_again_in_the_pass_that_moves_it() -> None:
    w = world(CASE.read_text(encoding="utf-8"))
    assert [(p["kind"], p["victim"]) for p in w.preemptions] == [("consolidate", "queue0/running-job1")]
    assert nodes(w, "running-job1") == ["n-01"] and nodes(w, "pending-job0") == ["n-02"]
    evicts = [e.message for e in w.events if e.reason == "Evict"]
    assert evicts and all("rescheduled due to bin packing (resource consolidation)" in m for m in evicts)


def test_nothing_moves_when_the_moved_job_would_find_no_place() -> None:
    doc = yaml.safe_load(CASE.read_text(encoding="utf-8"))
    # running-job0 takes both GPUs of n-01: running-job1 has nowhere to go
    doc["jobs"][0]["gpus_per_pod"] = 2
    w = world(yaml.safe_dump(doc))
    assert w.preemptions == []
    assert nodes(w, "pending-job0") == [None] and nodes(w, "running-job1") == ["n-02"]


def test_only_preemptible_jobs_move_and_a_build_job_does_not_consolidate() -> None:
    doc = yaml.safe_load(CASE.read_text(encoding="utf-8"))
    doc["jobs"][1]["priority"] = "inference"  # running-job1 may not move: running-job0 goes to n-02 instead
    w = world(yaml.safe_dump(doc))
    assert [(p["kind"], p["victim"]) for p in w.preemptions] == [("consolidate", "queue0/running-job0")]
    assert nodes(w, "running-job0") == ["n-02"] and nodes(w, "pending-job0") == ["n-01"]
    doc = yaml.safe_load(CASE.read_text(encoding="utf-8"))
    doc["jobs"][2]["priority"] = "inference"  # KAI's consolidation takes preemptible jobs only
    assert all(p["kind"] != "consolidate" for p in world(yaml.safe_dump(doc)).preemptions)
