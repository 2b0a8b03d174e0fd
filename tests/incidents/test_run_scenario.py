"""``manage.py run_scenario``: the JSON contract (docs/scenarios.md §5), exit status 2 for a bad file, expectation matching."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from io import StringIO
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from harness.expectations import check_expectations, precision

TINY = """
format: 1
name: tiny-taint
summary: A nightly eval job that does not tolerate the taint on every node.
start: 2026-11-29T00:00:00Z
duration: 40m
seed: 3
cluster:
  name: gpu-tiny
  scheduler: kai
  nodepools:
    - name: h100
      nodes: 2
      gpus_per_node: 8
      gpu_product: NVIDIA-H100-80GB-HBM3
      taints: [{key: dedicated, value: train, effect: NoSchedule}]
projects:
  - {name: eval, quota: {gpu: 8}}
jobs:
  - {name: eval-nightly, project: eval, submit: 2m, pods: 1, gpus_per_pod: 4}
alerts:
  - {name: GPUJobPendingTooLong, for: 10m}
expect:
  - alert: GPUJobPendingTooLong
    subject: {job: eval-nightly}
    top: untolerated_taint
    not_supported: [gpu_capacity_shortage, project_quota_exhausted]
"""


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("scenario_db")  # the webhook's server threads must see the database
def test_it_prints_the_scenarios_md_json_document(tmp_path: Path) -> None:
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    out = StringIO()
    call_command("run_scenario", str(path), "--json", "--database", "configured", stdout=out)
    doc = json.loads(out.getvalue())
    assert set(doc) == {"scenario", "start", "end", "incidents", "expect", "precision"}
    assert doc["scenario"] == "tiny-taint" and doc["start"] == "2026-11-29T00:00:00Z"
    inc = doc["incidents"][0]
    assert set(inc) == {
        "id",
        "url",
        "title",
        "status",
        "resolved_at",
        "alerts",
        "subjects",
        "diagnosed_at",
        "hypotheses",
        "diagnoses",
    }
    assert inc["title"] and inc["status"] in ("open", "resolved")
    # every diagnosis in time order, the first one being the onset's that ``hypotheses`` shows
    assert inc["diagnoses"] and inc["diagnoses"][0]["at"] == inc["diagnosed_at"]
    assert [d["at"] for d in inc["diagnoses"]] == sorted(d["at"] for d in inc["diagnoses"])
    assert inc["diagnoses"][0]["hypotheses"] == inc["hypotheses"]
    assert inc["url"] == f"/incidents/{inc['id']}/" and inc["alerts"] == ["GPUJobPendingTooLong"]
    assert {"kind": "job", "cluster": "gpu-tiny", "namespace": "eval", "name": "eval-nightly"} in inc[
        "subjects"
    ]
    top = inc["hypotheses"][0]
    assert set(top) == {"code", "status", "confidence", "statement", "evidence", "actions"}
    assert top["code"] == "untolerated_taint" and top["status"] == "supported" and top["evidence"]
    assert top["actions"] and set(top["actions"][0]) == {"title", "command", "impact", "verify", "rollback"}
    assert "dedicated=train:NoSchedule" in top["statement"]
    assert doc["expect"] == [{"alert": "GPUJobPendingTooLong", "passed": True, "why": ""}]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("scenario_db")
def test_the_simulator_in_a_process_of_its_own_gives_the_same_run(tmp_path: Path) -> None:
    """``--sim-process``: the simulated cluster served from a child process, read over the same HTTP, answers
    the same incidents, hypotheses and expectations as in this process; the child's cost is reported."""
    from collectors.models import Cluster
    from harness.scenario_run import run_scenario_file
    from incidents.models import Alert, Incident

    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    runs = []
    for own in (False, True):
        for model in (Alert, Incident, Cluster):  # a second run of the same alerts would be duplicates
            model.objects.all().delete()
        result = run_scenario_file(str(path), sim_process=own)
        doc = result.to_dict()
        for inc in doc["incidents"]:  # row ids and times of day differ between the two runs, nothing else
            inc.pop("id"), inc.pop("url"), inc.pop("diagnosed_at")
            for h in inc["hypotheses"]:
                h["evidence"] = len(h["evidence"])
        runs.append((doc, result.timings))
    (here, _), (there, timings) = runs
    assert here == there and here["incidents"] and here["expect"][0]["passed"]
    assert timings["sim_process_cpu_s"] > 0 and timings["sim_process_peak_mib"] > 0


def test_it_exits_2_with_the_loaders_problems_for_a_bad_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(TINY.replace("duration: 40m", "duration: 40m\nduraton: 1h"))
    err = StringIO()
    with pytest.raises(CommandError) as exc:
        call_command("run_scenario", str(path), "--json", "--database", "configured", stderr=err)
    assert exc.value.returncode == 2
    assert "duraton" in err.getvalue()


def _incident(alerts, subjects, codes):
    return {
        "id": 1,
        "url": "/incidents/1/",
        "alerts": alerts,
        "subjects": [{"kind": k, "cluster": "c", "namespace": "ns", "name": n} for k, n in subjects],
        "hypotheses": [
            {"code": c, "status": s, "confidence": 0.8, "statement": "", "evidence": [1]} for c, s in codes
        ],
    }


def test_it_checks_top_supported_and_not_supported_per_expectation() -> None:
    exp = SimpleNamespace(
        alert="GPUJobPendingTooLong",
        subject={"job": "train"},
        top="project_quota_exhausted",
        supported=("recent_change",),
        not_supported=("gpu_capacity_shortage",),
    )
    scenario = SimpleNamespace(expect=[exp], cluster=SimpleNamespace(name="c"))
    good = _incident(
        ["GPUJobPendingTooLong"],
        [("job", "train")],
        [
            ("project_quota_exhausted", "supported"),
            ("recent_change", "supported"),
            ("gpu_capacity_shortage", "refuted"),
        ],
    )
    assert check_expectations(scenario, [good])[0]["passed"]
    bad = _incident(
        ["GPUJobPendingTooLong"],
        [("job", "train")],
        [("gpu_capacity_shortage", "supported"), ("recent_change", "refuted")],
    )
    why = check_expectations(scenario, [bad])[0]["why"]
    assert (
        "top is gpu_capacity_shortage" in why
        and "recent_change is refuted" in why
        and "is supported, expected not" in why
    )
    other = _incident(["NodeNotReady"], [("job", "train")], [("project_quota_exhausted", "supported")])
    assert "no incident with alert GPUJobPendingTooLong" in check_expectations(scenario, [other])[0]["why"]


def _diagnosis(at: str, codes: list[tuple[str, str]]) -> dict:
    hyps = [{"code": c, "status": s, "confidence": 0.8, "statement": "", "evidence": [1]} for c, s in codes]
    return {"at": at, "hypotheses": hyps}


def test_an_expectation_with_a_moment_is_judged_on_the_diagnosis_in_force_then() -> None:
    onset = _diagnosis("2026-12-01T01:00:00Z", [("gpu_node_unavailable", "supported")])
    later = _diagnosis(
        "2026-12-01T02:05:00Z",
        [("project_quota_exhausted", "supported"), ("gpu_node_unavailable", "refuted")],
    )
    inc = _incident(["GPUJobPendingTooLong"], [("job", "train")], [("gpu_node_unavailable", "supported")])
    inc.update(diagnosed_at=onset["at"], diagnoses=[onset, later])

    def expect(at_s: int | None, top: str, not_supported: tuple[str, ...] = ()) -> SimpleNamespace:
        exp = SimpleNamespace(
            alert="GPUJobPendingTooLong",
            subject={"job": "train"},
            top=top,
            supported=(),
            not_supported=not_supported,
            at_s=at_s,
        )
        start = datetime(2026, 12, 1, tzinfo=UTC)
        return SimpleNamespace(expect=[exp], cluster=SimpleNamespace(name="c"), start=start)

    assert check_expectations(expect(None, "gpu_node_unavailable"), [inc])[0]["passed"]  # no `at`: the first
    # 02:04 is still the onset's answer; 02:05 on, the later one (its `at` is not later than the moment)
    assert check_expectations(expect(2 * 3600 + 240, "gpu_node_unavailable"), [inc])[0]["passed"]
    scenario = expect(2 * 3600 + 300, "project_quota_exhausted", ("gpu_node_unavailable",))
    assert check_expectations(scenario, [inc])[0]["passed"]
    assert precision(scenario, [inc]) == 1.0
    why = check_expectations(expect(3 * 3600, "gpu_node_unavailable"), [inc])[0]["why"]
    assert why == (
        "incident 1 at 2026-12-01T03:00:00Z: top is project_quota_exhausted, expected gpu_node_unavailable"
    )
    # before the first diagnosis, nothing is in force: the expectation fails and says so
    early = check_expectations(expect(1800, "gpu_node_unavailable"), [inc])[0]
    assert not early["passed"] and early["why"] == "incident 1: no diagnosis in force at 2026-12-01T00:30:00Z"


def test_precision_counts_each_judged_diagnosis_once() -> None:
    onset = _diagnosis("2026-12-01T01:00:00Z", [("gpu_node_unavailable", "supported")])
    later = _diagnosis(
        "2026-12-01T02:00:00Z", [("project_quota_exhausted", "supported"), ("recent_change", "supported")]
    )
    inc = _incident(["GPUJobPendingTooLong"], [("job", "train")], [("gpu_node_unavailable", "supported")])
    inc.update(diagnosed_at=onset["at"], diagnoses=[onset, later])
    exps = [
        SimpleNamespace(
            alert="GPUJobPendingTooLong",
            subject={"job": "train"},
            top=top,
            supported=(),
            not_supported=(),
            at_s=at,
        )
        for top, at in (
            ("gpu_node_unavailable", None),
            ("gpu_node_unavailable", 1800 + 3600),
            ("project_quota_exhausted", 3 * 3600),
        )
    ]
    scenario = SimpleNamespace(
        expect=exps, cluster=SimpleNamespace(name="c"), start=datetime(2026, 12, 1, tzinfo=UTC)
    )
    # the onset's diagnosis (judged twice, counted once): 1 of 1; the later one: 1 of 2 (recent_change unexpected)
    assert precision(scenario, [inc]) == round(2 / 3, 3)


FLICKER = """
format: 1
name: tiny-flicker
start: 2026-11-29T00:00:00Z
duration: 40m
seed: 3
cluster:
  name: gpu-tiny
  scheduler: kai
  nodepools:
    - {name: h100, nodes: 1, gpus_per_node: 8, gpu_product: NVIDIA-H100-80GB-HBM3,
       taints: [{key: dedicated, value: train, effect: NoSchedule}]}
    - {name: l40s, nodes: 1, gpus_per_node: 8, gpu_product: NVIDIA-L40S}
projects:
  - {name: eval, quota: {gpu: 16}}
jobs:
  - {name: eval-nightly, project: eval, submit: 2m, pods: 1, gpus_per_pod: 4,
     node_selector: {rcaweb.sim/nodepool: h100}}
  - {name: quick-a, project: eval, submit: 5m, pods: 1, gpus_per_pod: 1}
  - {name: quick-b, project: eval, submit: 20m, pods: 1, gpus_per_pod: 1}
alerts:
  - {name: GPUJobPendingTooLong, for: 10m}
"""


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("scenario_db")  # the webhook's server threads must see the database
def test_it_sweeps_when_an_alert_fires_or_holds_pending_and_dates_the_job_at_its_creation(
    tmp_path: Path,
) -> None:
    from datetime import UTC, datetime, timedelta

    from collectors.models import Change, EntityVersion, SourceRun
    from harness.scenario_run import run_scenario_file

    path = tmp_path / "flicker.yaml"
    path.write_text(FLICKER)
    run_scenario_file(str(path))
    start = datetime(2026, 11, 29, tzinfo=UTC)
    minutes = sorted(
        {
            int((t - start).total_seconds() // 60)
            for t in SourceRun.objects.filter(source="k8s", call__startswith="list pods").values_list(
                "time", flat=True
            )
        }
    )
    # 0: the first sweep; 3: eval-nightly (pending from 2m, untolerated taint) held through a tick; 12: its
    # alert fires; 27: the idle cadence. quick-a (5m) and quick-b (20m) are Pending only until their
    # containers start seconds later: their pending alerts never fire and cost no sweep.
    assert minutes == [0, 3, 12, 27]
    # First seen at 3, eval-nightly is pending since its creation at 2m: the job and its pod say when.
    first = EntityVersion.objects.filter(entity__kind="job", entity__name="eval-nightly").order_by(
        "valid_from"
    )[0]
    assert first.valid_from == start + timedelta(minutes=2)
    assert first.state["phase"] == "Pending"
    created = Change.objects.get(entity__kind="job", entity__name="eval-nightly", field="created")
    assert created.time == start + timedelta(minutes=2)


def test_a_simulator_process_that_cannot_build_its_world_says_why_and_is_not_left_running() -> None:
    from simulator.process import SimProcess, SimProcessError

    process = SimProcess(scenario="not a scenario")
    with pytest.raises(SimProcessError, match="the simulator failed") as exc:
        process.start()
    assert "Traceback" in str(exc.value)
    assert process._proc is None  # stopped and joined
