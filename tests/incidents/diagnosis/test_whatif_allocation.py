"""What each queue and department holds on the what-if page (incidents.diagnosis.whatif_allocation): GPUs, and
CPU cores and memory GiB with their KAI quota and limit, at t and after the pass before and after the edits; CPU
and memory columns only where some row sets or holds them."""

from __future__ import annotations

from incidents.diagnosis.types import EntityState, Ref
from incidents.diagnosis.whatif import Allocation, allocation_table, compare, parse_edit, parse_edits
from incidents.diagnosis.whatif_allocation import CPU, GPU, MEMORY, Amount, figure

from .dx_world import T0, job, node, pod, queue, world
from .test_quota_resource_causes import _running, _vision, _world

GI = 2**30


def _row(allocations: list[Allocation], name: str, kind: str = "queue") -> Allocation:
    (a,) = [a for a in allocations if a.name == name and a.kind == kind]
    return a


def test_raising_a_cpu_limit_starts_the_job_and_the_queues_cpu_rises_by_what_it_requests():
    # 32 cores held + 16 asked = 48 of a 40-core limit; its GPUs (2 held + 4 asked of 16) fit
    di = _world(_vision(limit_cpu_cores=40), held=[_running("prep", "vision", "h100-01", 2, 32)])
    wi = compare(di, [parse_edit("cpu_limit", "vision:48")])
    assert {j.job.ref.label: j.change for j in wi.changed} == {"vision/ft": "starts"}
    vision = _row(wi.allocations, "vision")
    assert (vision.cpu.limit, vision.cpu.quota) == (48.0, None)  # as the edit leaves it
    assert (vision.cpu.now, vision.cpu.before, vision.cpu.after, vision.cpu.delta) == (32.0, 32.0, 48.0, 16.0)
    assert (vision.now, vision.before, vision.after) == (2.0, 2.0, 6.0)  # its GPUs too
    d = vision.cpu.display
    assert (d["bound"], d["now"], d["before"], d["after"], d["delta"]) == ("∞ / 48", "32", "32", "48", "+16")
    table = allocation_table(wi.allocations)
    assert table.resources == [GPU, CPU]  # no pod requests memory, no queue bounds it
    assert table.heads == ["GPUs", "CPU (cores)"] and table.columns == 8
    assert table.rows == [(vision, [vision.gpus, vision.cpu])]


def test_without_the_raise_the_cpu_limit_holds_the_job_and_nothing_moves():
    di = _world(_vision(limit_cpu_cores=40), held=[_running("prep", "vision", "h100-01", 2, 32)])
    wi = compare(di, [parse_edit("cpu_limit", "vision:47")])
    vision = _row(wi.allocations, "vision")
    assert wi.changed == [] and (vision.cpu.before, vision.cpu.after, vision.cpu.delta) == (32.0, 32.0, 0.0)
    assert vision.cpu.limit == 47.0


def test_memory_is_counted_in_gib_with_its_quota_and_limit():
    q = _vision(quota_memory_bytes=64 * GI, limit_memory_bytes=80 * GI)
    held = [_running("prep", "vision", "h100-01", 2, 4, 64 * GI)]
    di = _world(q, cpu=4, memory=32 * GI, held=held)
    wi = compare(di, parse_edits({"memory_limit": ["vision:96Gi"]}))
    vision = _row(wi.allocations, "vision")
    assert (vision.memory.quota, vision.memory.limit) == (64.0, 96.0)
    assert (vision.memory.now, vision.memory.before, vision.memory.after) == (64.0, 64.0, 96.0)
    assert (vision.cpu.before, vision.cpu.after) == (4.0, 8.0)
    assert vision.memory.display["bound"] == "64 / 96" and vision.memory.display["delta"] == "+32"
    assert allocation_table(wi.allocations).resources == [GPU, CPU, MEMORY]


def test_a_departments_cpu_is_its_members_and_its_own_limit_holds_them():
    dept = EntityState(
        "department",
        "research",
        state={"scheduler": "kai", "queues": ["vision"], "quota_gpus": 32, "limit_cpu_cores": 40},
        valid_from=T0,
    )
    di = _world(_vision(), held=[_running("prep", "vision", "h100-01", 2, 32)], departments=[dept])
    before = compare(di, [])
    research = _row(before.allocations, "research", "department")
    assert (research.cpu.limit, research.cpu.now, research.cpu.after) == (40.0, 32.0, 32.0)  # ft is held
    wi = compare(di, [parse_edit("cpu_limit", "research:48")])
    research = _row(wi.allocations, "research", "department")
    assert (research.cpu.before, research.cpu.after, research.cpu.delta) == (32.0, 48.0, 16.0)
    assert (research.before, research.after) == (2.0, 6.0)
    vision = _row(wi.allocations, "vision")
    assert not vision.cpu.bounded and vision.cpu.display["bound"] == ""  # the queue sets none of its own


def test_removing_a_running_job_takes_its_cpu_out_of_what_is_held_at_t():
    di = _world(_vision(limit_cpu_cores=40), held=[_running("prep", "vision", "h100-01", 2, 32)])
    wi = compare(di, [parse_edit("remove", "vision/prep")])
    vision = _row(wi.allocations, "vision")
    # the removed pods free 32 cores: ft (16) fits the limit with the edit, not without it
    assert (vision.cpu.now, vision.cpu.before, vision.cpu.after) == (0.0, 32.0, 16.0)


def test_a_gpu_only_world_has_gpu_columns_only():
    nodes = [node("h100-01"), node("h100-02")]
    di = world(
        subjects=[Ref("job", "v1", "vision")],
        nodes=nodes,
        pods=[pod("v0-0", "v0", "vision", node_name="h100-01")],
        jobs=[job("v0", "vision", phase="Running"), job("v1", "vision")],
        queues=[queue("vision", 16, 24), queue("nlp", 8)],
    )
    wi = compare(di, [parse_edit("quota", "vision:24")])
    table = allocation_table(wi.allocations)
    assert table.resources == [GPU] and table.heads == ["GPUs"] and table.columns == 5
    vision = _row(wi.allocations, "vision")
    assert (vision.now, vision.before, vision.after) == (8.0, 16.0, 16.0)  # v1 starts on h100-02 either way
    assert [amounts for _, amounts in table.rows] == [[a.gpus] for a in wi.allocations]
    assert not vision.cpu.holds and not vision.cpu.bounded
    assert _row(wi.allocations, "nlp").display["bound"] == "8 / ∞"


def test_numbers_read_as_the_page_writes_them():
    assert [figure(v, 4) for v in (16.0, 0.5, 1 / 3, -0.00001, 1_048_576.0)] == [
        "16",
        "0.5",
        "0.3333",
        "0",
        "1048576",
    ]
    a = Amount(None, 2**20, 1.25, 1.25, 0.75, places=1)
    d = a.display
    assert (d["quota"], d["limit"], d["bound"]) == ("∞", "1048576", "∞ / 1048576")
    assert (d["now"], d["after"], d["delta"]) == ("1.2", "0.8", "-0.5") and a.delta == -0.5
    assert Amount(None, None, 0.0, 0.0, 0.0).display["bound"] == ""
