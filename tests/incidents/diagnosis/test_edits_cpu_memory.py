"""A KAI queue's or department's CPU and memory quota and limit as what-if edits (``cpu_quota``, ``cpu_limit``,
``memory_quota``, ``memory_limit``) and as the smallest edit that starts a job one of them holds
(incidents.diagnosis.edits), with the GPU raise in the same answer when its GPUs hold it too."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from urllib.parse import parse_qs

import pytest
import yaml

from incidents.diagnosis import scheduling_pass as SP
from incidents.diagnosis.edits import smallest_edits
from incidents.diagnosis.explain import explain_job
from incidents.diagnosis.types import EntityState
from incidents.diagnosis.whatif import Edit, EditError, apply_edits, parse_edit, parse_edits, would_start

from .dx_world import T0, job, queue
from .test_model_kai_cases import model_input, settle
from .test_quota_resource_causes import GB, _running, _vision, _world

GI = 2**30
SCENARIO = Path(__file__).resolve().parents[3] / "simulator" / "scenarios" / "living-cpu-limit-kai.yaml"


@pytest.mark.parametrize(
    ("kind", "raw", "number", "value", "words"),
    [
        ("cpu_limit", "vision:96", 96, "vision:96", "CPU limit of vision → 96 cores"),
        ("cpu_quota", "vision:0.5", 0.5, "vision:0.5", "CPU quota of vision → 0.5 cores"),
        ("cpu_quota", "vision:2500m", 2.5, "vision:2.5", "CPU quota of vision → 2.5 cores"),
        ("memory_limit", "vision:256Gi", 256 * GI, "vision:256Gi", "memory limit of vision → 256 GiB"),
        ("memory_limit", "vision:1.5Ti", 1536 * GI, "vision:1536Gi", "memory limit of vision → 1.5 TiB"),
        ("memory_quota", "research:500G", 500 * GB, "research:500G", "memory quota of research → 465.66 GiB"),
        ("memory_quota", "vision:1023", 1023, "vision:1023", "memory quota of vision → 1023 bytes"),
    ],
)
def test_cpu_and_memory_edits_read_write_back_and_say_their_numbers(kind, raw, number, value, words):
    e = parse_edit(kind, raw)
    assert e == Edit(kind, raw.split(":")[0], number=number)
    assert e.value == value and e.words == words
    assert parse_edit(kind, e.value) == e  # the value it writes back reads as the same edit


@pytest.mark.parametrize(
    ("kind", "raw", "words"),
    [
        ("cpu_limit", "vision:-8", "cpu_limit=vision:-8: a CPU limit is 0 or more"),
        ("memory_quota", "vision:-1Gi", "memory_quota=vision:-1Gi: a memory quota is 0 or more"),
        ("cpu_quota", "vision:2000000", "cpu_quota=vision:2000000: cores must be between 0 and 1,000,000"),
        ("memory_limit", "vision:2Ei", "memory_limit=vision:2Ei: memory must be between 0 and 1Ei"),
        ("cpu_limit", "vision:1.2345", "cpu_limit=vision:1.2345: expected <name>:<cores>"),
        ("cpu_limit", "vision:8 cores", "expected <name>:<cores>"),
        ("memory_limit", "vision:256GiB", "memory_limit=vision:256GiB: expected <name>:<bytes>"),
        ("memory_limit", "vision", "expected <name>:<bytes>"),
    ],
)
def test_cpu_and_memory_edits_refuse_negative_absurd_and_malformed_values(kind, raw, words):
    with pytest.raises(EditError, match=words) as got:
        parse_edit(kind, raw)
    assert got.value.param == kind


def test_they_are_applied_as_kai_fields_to_a_copy_and_name_what_does_not_exist():
    dept = EntityState(
        "department", "research", state={"scheduler": "kai", "queues": ["vision"]}, valid_from=T0
    )
    di = _world(_vision(limit_cpu_cores=40), departments=[dept])
    edits = parse_edits(
        {"cpu_limit": ["vision:48"], "memory_quota": ["research:512Gi"], "cpu_quota": ["research:100m"]}
    )
    out = apply_edits(di, edits)
    q, d = out.find("queue", "vision"), out.find("department", "research")
    assert q is not None and d is not None
    assert q.get("limit_cpu_cores") == 48 and q.get("quota_gpus") == 16
    assert d.get("quota_memory_bytes") == 512 * GI and d.get("quota_cpu_cores") == 0.1
    assert di.find("queue", "vision").get("limit_cpu_cores") == 40  # the input is left as it was
    with pytest.raises(
        EditError, match="memory_limit=nobody:1Gi: no queue, project or department nobody at t"
    ):
        apply_edits(di, [parse_edit("memory_limit", "nobody:1Gi")])


def _answers(di):
    with di.indexed():
        base = SP.cluster_pass(di)
        return smallest_edits(di, di.find("job", "ft", "vision"), base)


def _round_trip(query: str) -> list[Edit]:
    return parse_edits({k: v for k, v in parse_qs(query).items()})


def test_a_job_its_queues_cpu_limit_holds_gets_the_least_cpu_limit_that_starts_it():
    # 32 cores held + 16 asked = 48 of a 40-core limit; its GPUs (6 of 16) fit
    di = _world(_vision(limit_cpu_cores=40), held=[_running("prep", "vision", "h100-01", 2, 32)])
    u = _answers(di)
    a = u.answers[0]
    assert a.kind == "cpu_limit" and a.edits == [Edit("cpu_limit", "vision", number=48)]
    assert a.words == "CPU limit +8 cores on vision (to 48 cores)"
    assert a.sentence.startswith("CPU limit +8 cores on vision (to 48 cores) → starts now on ")
    assert a.query == "cpu_limit=vision%3A48" and _round_trip(a.query) == a.edits
    with di.indexed():
        ft = di.find("job", "ft", "vision")
        assert would_start(di, ft, a.edits[0]).outcome == SP.STARTS
        assert (
            would_start(di, ft, Edit("cpu_limit", "vision", number=47.999)).outcome == SP.QUOTA
        )  # the least


def test_a_cpu_limit_and_a_memory_limit_both_passed_are_raised_in_one_answer():
    q = _vision(limit_cpu_cores=40, limit_memory_bytes=200 * GB)
    di = _world(q, memory=100 * GB, held=[_running("prep", "vision", "h100-01", 2, 32, 150 * GB)])
    a = _answers(di).answers[0]
    assert a.edits == [
        Edit("cpu_limit", "vision", number=48),
        Edit("memory_limit", "vision", number=250 * GB),
    ]
    assert a.words == (
        "CPU limit +8 cores on vision (to 48 cores) and memory limit +46.57 GiB on vision (to 232.83 GiB)"
    )
    assert _round_trip(a.query) == a.edits


def test_a_job_its_gpu_limit_and_its_cpu_limit_both_hold_gets_both_raises_in_one_answer():
    q = queue("vision", 4, 4)
    q.state["limit_cpu_cores"] = 40
    di = _world(q, held=[_running("prep", "vision", "h100-01", 2, 32)])
    a = _answers(di).answers[0]
    assert a.edits == [Edit("limit", "vision", number=6), Edit("cpu_limit", "vision", number=48)]
    assert a.words == "limit +2 on vision (to 6) and CPU limit +8 cores on vision (to 48 cores)"
    with di.indexed():  # neither alone starts it
        ft = di.find("job", "ft", "vision")
        assert would_start(di, ft, a.edits[0]).outcome == SP.QUOTA
        assert would_start(di, ft, a.edits[1]).outcome == SP.QUOTA


def test_a_non_preemptible_job_past_its_deserved_cpu_quota_gets_the_quota_raised():
    q = _vision(quota_cpu_cores=20, limit_cpu_cores=24)
    held = [_running("srv", "vision", "h100-01", 1, 8, priority_class="inference")]
    di = _world(q, cpu=14, held=held, priority_class="inference")  # 8 + 14 = 22: within the limit
    a = _answers(di).answers[0]
    assert a.edits == [Edit("cpu_quota", "vision", number=22)]
    assert a.words == "CPU quota +2 cores on vision (to 22 cores)"


def test_a_departments_cpu_limit_is_raised_on_the_department():
    q = _vision()
    q.state["department"] = "research"
    dept = EntityState(
        "department",
        "research",
        state={"scheduler": "kai", "quota_gpus": 32, "queues": ["vision"], "projects": ["vision"],
               "limit_cpu_cores": 36},
        valid_from=T0,
    )  # fmt: skip
    di = _world(q, held=[_running("prep", "vision", "h100-01", 2, 32)], departments=[dept])
    a = _answers(di).answers[0]
    assert a.edits == [Edit("cpu_limit", "research", number=48)]
    assert a.words == "CPU limit +12 cores on research (to 48 cores)"


def test_the_cpu_the_pass_starts_before_the_job_is_charged_to_its_limit():
    # "early", ahead in line, starts in the same pass with 8 cores: 32 + 8 + 16 = 56 of the 48-core limit
    early = job("early", gpus_per_pod=1, submitted=T0)
    early.state["requests_per_pod"] = {"cpu": "8", "memory": "0"}
    held = [_running("prep", "vision", "h100-01", 2, 32)]
    di = _world(_vision(limit_cpu_cores=48), held=held, submitted=T0 + timedelta(minutes=5))
    di.jobs.append(early)
    with di.indexed():
        base = SP.cluster_pass(di)
        assert [(c.job.name, c.outcome) for c in base.considered] == [("early", SP.STARTS), ("ft", SP.QUOTA)]
    a = _answers(di).answers[0]
    assert a.edits == [Edit("cpu_limit", "vision", number=56)]
    assert a.words == "CPU limit +8 cores on vision (to 56 cores)"


def _scenario_input():
    scenario = yaml.safe_load(SCENARIO.read_text(encoding="utf-8"))
    for key in ("format", "summary", "duration", "seed", "alerts", "expect"):
        scenario.pop(key)
    start = scenario["start"]
    scenario["start"] = start.strftime("%Y-%m-%dT%H:%M:%SZ") if isinstance(start, datetime) else start
    di = model_input(scenario)
    di.t = datetime.fromisoformat("2026-11-29T00:20:00+00:00")  # vision-ft submitted at 00:10
    settle(di)  # vision-prep and nlp-train start; vision-ft waits
    return di


def test_the_bundled_cpu_limit_scenarios_waiting_job_is_offered_the_cpu_limit_raise():
    di = _scenario_input()
    assert {j.name: j.get("phase") for j in di.jobs} == {
        "vision-prep": "Running",
        "nlp-train": "Running",
        "vision-ft": "Pending",
    }
    ex = explain_job(di, di.find("job", "vision-ft", "vision"))
    assert ex.unblock is not None
    (a,) = ex.unblock.answers
    assert a.edits == [Edit("cpu_limit", "vision", number=48)]
    assert a.sentence.startswith("CPU limit +8 cores on vision (to 48 cores) → starts now on h100-")
    # the panel's what-if link: the same edit, and one pass with it starts the job
    assert ex.whatif_edit == Edit("cpu_limit", "vision", number=48) and ex.whatif_starts
