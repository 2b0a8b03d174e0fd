"""A KAI Queue's CPU and memory quota, limit and over-quota weight → the queue, project and department states the
scheduling model reads (docs/inventory.md): CPU millicores to cores, memory megabytes (10^6 bytes) to bytes,
-1 or absent to no key (unlimited, as the model reads a missing key), 0 kept as 0."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from collectors import mapping
from incidents.diagnosis.resources import CPU, MEMORY, dims_of
from incidents.diagnosis.types import EntityState

FIX = Path(__file__).parent / "fixtures"


def _queue(name: str, resources: dict[str, Any], parent: str = "dept") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": f"uid-{name}"},
        "spec": {"parentQueue": parent, "priority": 50, "resources": resources},
    }


RESOURCES = {
    "gpu": {"quota": 8, "limit": 16, "overQuotaWeight": 1},
    "cpu": {"quota": 64000, "limit": 96500, "overQuotaWeight": 2},
    "memory": {"quota": 512000, "limit": -1, "overQuotaWeight": 3},
}


def _states(queues: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    out = mapping.map_kai_queues(queues, {})
    out += mapping.map_kai_departments(queues)
    return {(o.kind, o.name): o.state for o in out}


def test_a_queues_cpu_and_memory_reach_its_queue_and_project_states_in_cores_and_bytes():
    states = _states([_queue("dept", {}, parent=""), _queue("vision", RESOURCES)])
    for key in (("queue", "vision"), ("project", "vision")):
        st = states[key]
        assert st["quota_cpu_cores"] == 64.0 and st["limit_cpu_cores"] == 96.5
        assert st["quota_memory_bytes"] == 512 * 10**9 and "limit_memory_bytes" not in st
        assert st["over_quota_weight_cpu"] == 2.0 and st["over_quota_weight_memory"] == 3.0
        assert st["quota_gpus"] == 8 and st["limit_gpus"] == 16  # the GPUs as before


def test_the_model_reads_the_mapped_keys_as_the_queue_says_them():
    st = _states([_queue("dept", {}, parent=""), _queue("vision", RESOURCES)])[("queue", "vision")]
    dims = dims_of(EntityState("queue", "vision", state=st))
    # back in the Queue's own units: millicores, and bytes of its megabytes
    assert dims[CPU].deserved == 64000 and dims[CPU].limit == 96500 and dims[CPU].weight == 2
    assert dims[MEMORY].deserved == 512000 * 10**6 and dims[MEMORY].limit is None and dims[MEMORY].weight == 3


def test_minus_one_and_absent_are_unlimited_and_zero_stays_zero():
    zero = {"cpu": {"quota": 0, "limit": 0}, "memory": {"quota": "0", "limit": -1, "overQuotaWeight": 1}}
    states = _states([_queue("dept", {}, parent=""), _queue("z", zero), _queue("bare", {"gpu": {"quota": 2}})])
    z, bare = states[("queue", "z")], states[("queue", "bare")]
    assert z["quota_cpu_cores"] == 0.0 and z["limit_cpu_cores"] == 0.0 and z["quota_memory_bytes"] == 0
    assert "limit_memory_bytes" not in z and "over_quota_weight_cpu" not in z  # unset: KAI's 1
    assert z["over_quota_weight_memory"] == 1.0
    assert not [k for k in bare if k.endswith(("_cores", "_bytes")) or k.startswith("over_quota_weight_")]
    dims = dims_of(EntityState("queue", "z", state=z))
    assert dims[CPU].deserved == 0 and dims[CPU].limit == 0 and dims[MEMORY].limit is None


def test_a_department_carries_its_parent_queues_cpu_and_memory():
    dept = _queue("dept", {"gpu": {"quota": 24}, "cpu": {"quota": -1, "limit": 128000}}, parent="")
    st = _states([dept, _queue("vision", RESOURCES)])[("department", "dept")]
    assert st["limit_cpu_cores"] == 128.0 and "quota_cpu_cores" not in st
    assert "quota_memory_bytes" not in st and st["quota_gpus"] == 24


def test_the_simulators_unlimited_queues_keep_the_state_they_had():
    # every resource -1, weights 1: no key is written, so an upgrade opens no change on such a queue
    kai = json.loads((FIX / "sim_kai.json").read_text())
    for o in mapping.map_kai_queues(kai["queues"], {}):
        extra = {k for k in o.state if k.endswith(("_cores", "_bytes")) or k.startswith("over_quota_weight_")}
        assert not extra, (o.name, extra)


def test_kueue_queues_carry_no_cpu_or_memory_keys():
    cq = {"metadata": {"name": "cq"}, "spec": {"resourceGroups": []}}
    (q, p) = mapping.map_kueue_queues([cq], [])
    assert "limit_cpu_cores" not in q.state and "limit_cpu_cores" not in p.state
