"""The Alibaba trace converter (simulator.openb) on a hand-made CSV pair in the trace's format."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.engine.world import World
from simulator.openb import TraceError, read_nodes, read_pods, scenario_text, trace_scenario
from simulator.scenario import load_scenario

FIXTURES = Path(__file__).parent / "fixtures" / "openb"
NODES, PODS = FIXTURES / "nodes.csv", FIXTURES / "pods.csv"


def test_whole_trace_keeps_every_gpu_node_shape_and_pod_request():
    sc = load_scenario(trace_scenario(NODES, PODS, hours=1))
    pools = {p.name: p for p in sc.cluster.nodepools}
    assert sorted(pools) == ["g2-8g-96c-384g", "p100-2g-64c-256g", "v100m32-8g-96c-768g"]  # no GPU-less node
    p100 = pools["p100-2g-64c-256g"]
    assert (p100.nodes, p100.gpus_per_node, p100.gpu_product) == (3, 2, "Tesla-P100-PCIE-16GB")
    assert (p100.cpu_millis, p100.memory_bytes, p100.sharing) == (64000, 262144 * 2**20, True)
    jobs = {j.name: j for j in sc.jobs}
    assert [j.name for j in sorted(sc.jobs, key=lambda j: (j.submit_s, j.name))] == [
        "openb-pod-0000",
        "openb-pod-0001",
        "openb-pod-0002",
        "openb-pod-0003",
        "openb-pod-0004",
    ]
    share = jobs["openb-pod-0003"]
    assert (share.pods, share.gpus_per_pod, share.cpu_millis, share.memory_bytes) == (
        1,
        0.46,
        6000,
        12288 * 2**20,
    )
    assert jobs["openb-pod-0001"].gpus_per_pod == 8
    cpu_only = jobs["openb-pod-0002"]
    assert (cpu_only.gpus_per_pod, cpu_only.memory_bytes) == (
        0,
        2**20,
    )  # a request of 0 → the smallest quantity
    assert all(j.runtime_s is None for j in sc.jobs)  # placed pods stay, as in the ATC '23 replay


def test_creation_times_map_linearly_from_the_first_deletion_onto_the_span_before_the_tail():
    sc = load_scenario(trace_scenario(NODES, PODS, hours=1))
    submit = {j.name: j.submit_s for j in sc.jobs}
    # Observed from t=4500 (the earliest deletion) to the last creation at 7000, onto 0..1800 s (1 h - 30 min).
    assert submit == {
        "openb-pod-0000": 0,
        "openb-pod-0001": 0,
        "openb-pod-0002": 0,
        "openb-pod-0003": 360,
        "openb-pod-0004": 1800,
    }


def test_a_fraction_keeps_each_shape_rounded_half_up_and_every_nth_pod():
    sc = load_scenario(trace_scenario(NODES, PODS, hours=1, fraction=0.5))
    assert {p.name: p.nodes for p in sc.cluster.nodepools} == {
        "p100-2g-64c-256g": 2,
        "g2-8g-96c-384g": 1,
        "v100m32-8g-96c-768g": 1,
    }
    assert sorted(j.name for j in sc.jobs) == ["openb-pod-0000", "openb-pod-0002", "openb-pod-0004"]
    assert sc.name == "openb-trace-50pct"


def test_the_scenario_bin_packs_the_real_requests():
    world = World.from_scenario(load_scenario(trace_scenario(NODES, PODS, hours=1)))
    world.advance_to(world.end)
    pods = {p.job: p for p in world.pods.values()}
    # One GPU on the first P100 node, eight on the first 8-GPU node in pool order; the CPU-only pod where the
    # fewest GPUs are free (the full G2 node still has the cores), the share on the P100 node already in use.
    assert pods["openb-pod-0000"].node == "p100-2g-64c-256g-01"
    assert pods["openb-pod-0001"].node == "g2-8g-96c-384g-01"
    assert pods["openb-pod-0002"].node == "g2-8g-96c-384g-01"
    share = pods["openb-pod-0003"]
    assert (share.node, share.shared, share.gpu_indices) == ("p100-2g-64c-256g-01", True, [1])


def test_bad_csv_names_the_file_line_and_problem(tmp_path):
    bad = tmp_path / "pods.csv"
    bad.write_text(PODS.read_text().replace("openb-pod-0001,88000", "openb-pod-0001,lots"))
    with pytest.raises(TraceError, match=r"pods.csv: line 4: cpu_milli is 'lots', expected a whole number"):
        read_pods(bad)
    nodes = tmp_path / "nodes.csv"
    nodes.write_text(NODES.read_text().replace("G2", "H800"))
    with pytest.raises(TraceError, match=r"line 5: GPU model 'H800' is not one of the trace's"):
        read_nodes(nodes)
    nodes.write_text("sn,cpu_milli,gpu\nx,1,1\n")
    with pytest.raises(TraceError, match=r"line 1: missing column\(s\) memory_mib, model"):
        read_nodes(nodes)
    with pytest.raises(TraceError, match="fraction 0: expected"):
        scenario_text(read_nodes(NODES), read_pods(PODS), fraction=0)
