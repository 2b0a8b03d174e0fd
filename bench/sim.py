"""Benchmark the simulated cluster's servers at fleet scale (not a test; prints figures).

A 1,000-node / 8,000-GPU / 20,000-pod KAI cluster over 6 simulated hours:
ticks per second (world + API store sync + alert sender), the time to serve
the full pod list through the official kubernetes client (paginated and not,
and the raw HTTP body alone), and peak memory. Target: the full pod list
serves in under 3 s.

    .venv/bin/python bench/sim.py [--nodes 1000] [--pods 20000] [--hours 6] [--tick 60] [--max-ticks N]
    .venv/bin/python bench/sim.py --serving-only     # the same fleet from state objects: the servers alone

The default path drives the real engine (simulator.engine), whose tick cost
grows with the number of pods; ``--max-ticks`` bounds the run.

``--pipeline`` (issue 16) fast-forwards a busy 12 h cluster of 200 nodes (1,600 GPUs, ten projects, ~2,000
jobs, a GPU off the bus, a NotReady node, a crash loop and a quota cut) through the whole pipeline, exactly
as ``manage.py run_scenario FILE --database configured --sim-process --json`` does (``--in-process``: without
``--sim-process``), on the PostgreSQL database of
DATABASE_URL (default postgres://postgres@127.0.0.1:5432/rcaweb_trace; created, migrated and emptied first),
and prints wall time, peak memory, incidents and the time per stage (bench/stages.py), evidence and
diagnosis included. Target: ≤ 5 minutes.

    .venv/bin/python bench/sim.py --pipeline [--nodes 200] [--hours 12] [--jobs 2000]

The default path and ``--serving-only`` measure the simulator alone, so they use it directly: its public API
(``simulator``: ``World``, ``load_scenario``, ``SimServer``), the state objects of ``simulator.state`` for the
fleet without the engine, and the server's API store to time its sync. ``--pipeline`` runs the simulation
driver (``harness``, through ``run_scenario``).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kubernetes import client, config  # noqa: E402

from simulator import SimServer, World, load_scenario  # noqa: E402
from simulator.state import SimChange, SimGPU, SimJob, SimNode, SimPod, SimProject  # noqa: E402

PROJECTS = 200
T0 = datetime(2026, 11, 29, tzinfo=UTC)


class FleetState:
    """``--serving-only``: the same fleet built directly from state.py objects, without the engine,
    to measure the servers alone (8,000 pods bound, the rest pending)."""

    def __init__(self, nodes: int, pods: int) -> None:
        self.now = T0 + timedelta(hours=1)
        self.tick_seconds = 60
        self.cluster_name = "gpu-bench"
        self.dcgm_labels = "classic"
        self.scenario = SimpleNamespace(
            cluster=SimpleNamespace(name="gpu-bench", scheduler="kai", dcgm_labels="classic")
        )
        self.changes: list[SimChange] = []
        self.nodes = {}
        width = len(str(nodes))
        for i in range(1, nodes + 1):
            name = f"h100-{i:0{max(2, width)}d}"
            gpus = [
                SimGPU(
                    index=g,
                    uuid=f"GPU-{i:08x}-0000-0000-0000-{g:012x}",
                    pci_bus_id=f"00000000:{0x1A + g:02X}:00.0",
                )
                for g in range(8)
            ]
            self.nodes[name] = SimNode(
                name=name,
                nodepool="h100",
                gpu_product="NVIDIA-H100-80GB-HBM3",
                gpu_memory_mib=81559,
                labels={"kubernetes.io/hostname": name},
                taints=[],
                gpus=gpus,
                created_at=T0 - timedelta(days=30),
                uid=f"node-{i}",
            )
        self.projects = {
            f"team-{i:02d}": SimProject(
                name=f"team-{i:02d}",
                namespace=f"team-{i:02d}",
                quota_gpus=nodes * 8 // PROJECTS,
                limit_gpus=None,
                over_quota_weight=1,
                priority=0,
                created_at=T0,
                uid=f"p-{i}",
            )
            for i in range(PROJECTS)
        }
        self.jobs, self.pods = {}, {}
        free = [(n, g) for n in self.nodes.values() for g in n.gpus]
        for k in range(pods):
            project = f"team-{k % PROJECTS:02d}"
            job = SimJob(
                name=f"job-{k:05d}",
                project=project,
                namespace=project,
                uid=f"job-{k}",
                submit_at=T0,
                pods=1,
                gpus_per_pod=1,
                priority_class="train",
                runtime_s=None,
                image="nvcr.io/nvidia/pytorch:24.08-py3",
                node_selector={},
                tolerations=[],
                sm_activity=0.7,
                failure=None,
                state="Pending",
            )
            pod = SimPod(
                name=f"job-{k:05d}-0-abcde",
                namespace=project,
                job=job.name,
                index=0,
                uid=f"pod-{k}",
                created_at=T0,
                gpus_requested=1,
                image=job.image,
                scheduled_message=f"0/{nodes} nodes are available: {nodes} Insufficient nvidia.com/gpu.",
            )
            if k < len(free):
                node, gpu = free[k]
                gpu.pod = f"{project}/{pod.name}"
                pod.node, pod.gpu_indices, pod.phase, pod.started_at, pod.scheduled_message = (
                    node.name,
                    [gpu.index],
                    "Running",
                    T0,
                    None,
                )
                job.state, job.started_at = "Running", T0
            self.jobs[f"{project}/{job.name}"] = job
            self.pods[f"{project}/{pod.name}"] = pod

    def advance_to(self, t: datetime) -> None:
        self.now = t

    def live_events(self) -> list[Any]:
        return []

    def gpu_metric(self, node: str, index: int, metric: str, t: datetime) -> float | None:
        return 50.0

    def gpu_pod_at(self, node: str, index: int, t: datetime) -> str | None:
        return self.nodes[node].gpus[index].pod

    def alerts(self) -> list[dict[str, Any]]:
        return []


def scenario_text(nodes: int, pods: int, hours: int) -> str:
    """One pool of 8-GPU nodes, 200 projects sharing the quota, ``pods`` one-GPU jobs arriving in the first ~2 minutes."""
    per_project = pods // PROJECTS
    quota = nodes * 8 // PROJECTS
    lines = [
        "format: 1",
        "name: bench-fleet",
        "summary: Fleet-scale benchmark world.",
        "start: 2026-11-29T00:00:00Z",
        f"duration: {hours}h",
        "seed: 11",
        "cluster:",
        "  name: gpu-bench",
        "  scheduler: kai",
        "  nodepools:",
        f"    - {{name: h100, nodes: {nodes}, gpus_per_node: 8, gpu_product: NVIDIA-H100-80GB-HBM3}}",
        "projects:",
    ]
    lines += [f"  - {{name: team-{i:02d}, quota: {{gpu: {quota}}}}}" for i in range(PROJECTS)]
    lines.append("jobs:")
    for i in range(PROJECTS):
        lines.append(
            f"  - generate: {{count: {per_project}, project: team-{i:02d}, pods: 1, gpus_per_pod: [1], "
            f"submit_every: 1s, runtime: [{hours}h, {hours * 2}h], name_prefix: t{i:02d}-job}}"
        )
    lines += ["alerts:", "  - {name: GPUJobPendingTooLong, for: 15m}", "  - {name: NodeNotReady, for: 5m}"]
    return "\n".join(lines) + "\n"


PIPELINE_PROJECTS = (
    "vision",
    "nlp",
    "speech",
    "recsys",
    "research",
    "robotics",
    "search",
    "ads",
    "llm",
    "infra",
)


def pipeline_scenario(nodes: int, hours: int, jobs: int) -> str:
    """The issue 16 cluster: two pools of 8-GPU nodes, ten projects sharing the GPUs, ``jobs`` jobs arriving
    over the span (sized 1-8 GPUs, some gangs), and four faults with the alerts that report them."""
    h100 = nodes // 2
    a100 = nodes - h100
    width = {"h100": max(2, len(str(h100))), "a100": max(2, len(str(a100)))}
    n = lambda pool, i: f"{pool}-{i:0{width[pool]}d}"  # noqa: E731
    gpus = nodes * 8
    quota = gpus // len(PIPELINE_PROJECTS)
    per = max(1, (jobs - 2) // len(PIPELINE_PROJECTS))
    every = max(1, hours * 3600 * 9 // 10 // per)
    lines = [
        "format: 1",
        f"name: bench-pipeline-{nodes}",
        f"summary: A busy {nodes}-node cluster over {hours} h for bench/sim.py --pipeline (issue 16).",
        "start: 2026-11-29T00:00:00Z",
        f"duration: {hours}h",
        "seed: 16",
        "cluster:",
        "  name: gpu-bench",
        "  scheduler: kai",
        "  nodepools:",
        f"    - {{name: h100, nodes: {h100}, gpus_per_node: 8, gpu_product: NVIDIA-H100-80GB-HBM3}}",
        f"    - {{name: a100, nodes: {a100}, gpus_per_node: 8, gpu_product: NVIDIA-A100-SXM4-80GB}}",
        "projects:",
    ]
    for i, name in enumerate(PIPELINE_PROJECTS):
        lines.append(
            f"  - {{name: {name}, quota: {{gpu: {quota}}}, limit: {{gpu: {quota * 2}}}, priority: {i % 3 * 10}}}"
        )
    lines += [
        "jobs:",
        "  - {name: asr-finetune, project: speech, submit: 20m, pods: 1, gpus_per_pod: 4,"
        " failure: {kind: crashloop, log: \"KeyError: 'tokenizer_path'\"}}",
        "  - {name: resnet-train, project: vision, submit: 3h15m, pods: 4, gpus_per_pod: 8, runtime: 2h}",
    ]
    for i, name in enumerate(PIPELINE_PROJECTS):
        sizes = "[1, 2, 4, 8]" if i % 2 else "[1, 2, 4]"
        lines.append(
            f"  - generate: {{count: {per}, project: {name}, pods: {1 + i % 2}, gpus_per_pod: {sizes}, "
            f"submit_every: {every}s, runtime: [20m, 3h], name_prefix: {name}-batch}}"
        )
    lines += [
        "events:",
        "  - {at: 3h, quota: {project: vision, quota: {gpu: 8}, limit: {gpu: 8}}, actor: platform-admin}",
        f"  - {{at: 2h, xid: {{node: {n('h100', 3)}, gpu: 4, code: 79}}}}",
        f"  - {{at: 5h, node_ready: {{node: {n('a100', 7)}, ready: false}}}}",
        f"  - {{at: 7h, resolve: {{node: {n('a100', 7)}}}}}",
        "alerts:",
        "  - {name: GPUJobPendingTooLong, for: 15m}",
        "  - {name: GPUXidError}",
        "  - {name: GPUMissing}",
        "  - {name: NodeNotReady, for: 5m}",
        "  - {name: PodCrashLooping, for: 10m}",
    ]
    return "\n".join(lines) + "\n"


def pipeline_main(args: argparse.Namespace) -> None:
    """``--pipeline``: the scenario through run_scenario on PostgreSQL, with the time per stage."""
    import io
    import os

    os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/rcaweb_trace")
    # Production's settings: with DEBUG, Django wraps every cursor to log each query (a third of this
    # process' CPU in a run, the figures then say nothing about a deployment).
    os.environ["RCAWEB_DEBUG"] = "false"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rcaweb.settings")
    os.environ.setdefault("RCAWEB_SECRET_KEY", "bench-only-secret")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from stages import children_usage, ensure_database, load, pipeline_stages

    ensure_database(os.environ["DATABASE_URL"])
    import django

    django.setup()
    from django.core.management import call_command

    path = Path(__file__).resolve().parent.parent / "var" / "bench" / f"pipeline-{args.nodes}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(pipeline_scenario(args.nodes, args.hours, args.jobs))
    call_command("migrate", verbosity=0, interactive=False)
    call_command("flush", verbosity=0, interactive=False)
    stages = pipeline_stages()
    print(
        f"scenario {path}: {args.nodes} nodes, {args.nodes * 8} GPUs, {args.hours} h; load average {load()}"
    )
    reporter = (
        stages.report_every(args.progress, lambda line: print(line, flush=True)) if args.progress else None
    )
    buf = io.StringIO()
    t0, cpu0 = time.perf_counter(), time.process_time()
    own = [] if args.in_process else ["--sim-process"]
    call_command("run_scenario", str(path), "--database", "configured", "--json", *own, stdout=buf)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    sim_cpu, sim_peak = children_usage()
    if reporter is not None:
        reporter.set()
    stages.restore()
    doc = json.loads(buf.getvalue())
    jobs = len(load_scenario(str(path)).jobs)
    print(
        f"{jobs} jobs -> {len(doc['incidents'])} incidents; wall {wall:.0f} s (process CPU {cpu:.0f} s), "
        f"peak memory {peak_mib():.0f} MiB, load average {load()}"
    )
    if own:
        print(f"simulator process: CPU {sim_cpu:.0f} s, peak memory {sim_peak:.0f} MiB")
    print(f"{'stage':40} {'seconds':>8} {'calls':>7}")
    for name, secs, calls in stages.table():
        print(f"{name:40} {secs:8.1f} {calls:7d}")
    print(f"target: the whole pipeline in ≤ 5 min -> {'meets' if wall <= 300 else 'misses'} ({wall:.0f} s)")


def table_listing(server: SimServer) -> tuple[float, int]:
    """What ``kubectl get pods -A`` makes the API server do: Table pages of 500 over HTTPS, following continue."""
    import urllib.parse
    import urllib.request

    accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io"
    headers = {"Authorization": f"Bearer {server.kube_token}", "Accept": accept}
    context = server.kube_tls.client_context()
    rows, token = 0, ""
    t = time.perf_counter()
    while True:
        query = urllib.parse.urlencode({"limit": 500, **({"continue": token} if token else {})})
        req = urllib.request.Request(f"{server.kube_url}/api/v1/pods?{query}", headers=headers)
        with urllib.request.urlopen(req, context=context) as resp:
            page = json.loads(resp.read())
        rows += len(page["rows"])
        token = page["metadata"].get("continue") or ""
        if not token:
            return time.perf_counter() - t, rows


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument("--hours", type=int, default=6)
    parser.add_argument("--tick", type=int, default=60, help="seconds per advance")
    parser.add_argument(
        "--max-ticks", type=int, default=0, help="stop advancing after N ticks (0: run the whole span)"
    )
    parser.add_argument(
        "--serving-only", action="store_true", help="build the fleet from state objects, without the engine"
    )
    parser.add_argument(
        "--pipeline", action="store_true", help="the 12 h / 200-node cluster through the whole pipeline"
    )
    parser.add_argument("--jobs", type=int, default=2000, help="--pipeline: jobs over the span")
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="--pipeline: the simulator in this process (default: run_scenario --sim-process)",
    )
    parser.add_argument(
        "--progress", type=float, default=60, help="--pipeline: stage times every N s (0: off)"
    )
    args = parser.parse_args()
    if args.pipeline:
        if "--nodes" not in sys.argv:
            args.nodes = 200
        if "--hours" not in sys.argv:
            args.hours = 12
        pipeline_main(args)
        return

    t = time.perf_counter()
    if args.serving_only:
        world: Any = FleetState(args.nodes, args.pods)
        world.end = world.now + timedelta(hours=args.hours)
    else:
        world = World.from_scenario(load_scenario(scenario_text(args.nodes, args.pods, args.hours)))
    print(f"world built: {args.nodes} nodes, {args.nodes * 8} GPUs in {time.perf_counter() - t:.1f} s")

    with SimServer(world, alert_sink=lambda payload: None) as server:
        sync_time = 0.0
        real_sync = server.store.sync

        def timed_sync(w: object) -> int:
            nonlocal sync_time
            s = time.perf_counter()
            n = real_sync(w)
            sync_time += time.perf_counter() - s
            return n

        server.store.sync = timed_sync  # type: ignore[method-assign]
        ticks = 0
        t = time.perf_counter()
        while world.now < world.end and (not args.max_ticks or ticks < args.max_ticks):
            server.advance_to(world.now + timedelta(seconds=args.tick))
            ticks += 1
            if ticks % 10 == 0:
                print(f"  {ticks} ticks, {time.perf_counter() - t:.0f} s", flush=True)
        elapsed = time.perf_counter() - t
        pods = len(server.store.entries.get("pods", {}))
        print(
            f"{ticks} ticks of {args.tick} s in {elapsed:.1f} s: {ticks / elapsed:.2f} ticks/s "
            f"(API store sync {sync_time:.1f} s of it); {pods} pods, resourceVersion {server.store.rv}"
        )

        api = config.new_client_from_config(config_file=server.kubeconfig_path)
        core = client.CoreV1Api(api)
        t = time.perf_counter()
        response = core.list_pod_for_all_namespaces(_preload_content=False)
        body = response.data
        raw_s = time.perf_counter() - t
        print(f"full pod list, raw HTTP: {len(body) / 1e6:.1f} MB in {raw_s:.2f} s")
        t = time.perf_counter()
        items = json.loads(core.list_pod_for_all_namespaces(_preload_content=False).data)["items"]
        print(
            f"full pod list, kubernetes client with _preload_content=False + json.loads: {len(items)} pods "
            f"in {time.perf_counter() - t:.2f} s"
        )
        del items
        t = time.perf_counter()
        listed = core.list_pod_for_all_namespaces()
        full_s = time.perf_counter() - t
        print(
            f"full pod list, kubernetes client (deserialised V1Pod objects): {len(listed.items)} pods in {full_s:.2f} s"
        )
        t = time.perf_counter()
        count, token = 0, None
        while True:
            page = core.list_pod_for_all_namespaces(limit=500, _continue=token)
            count += len(page.items)
            token = page.metadata._continue
            if not token:
                break
        print(
            f"paginated pod list (limit 500), kubernetes client: {count} pods in {time.perf_counter() - t:.2f} s"
        )
        table_s, rows = table_listing(server)
        print(
            f"full pod list as server-side Tables (kubectl get pods -A: Accept as=Table, chunks of 500): "
            f"{rows} rows in {table_s:.2f} s"
        )
        verdict = "meets" if raw_s < 3 else "misses"
        print(f"target: the full pod list serves in under 3 s -> {verdict} ({raw_s:.2f} s raw)")
    print(f"peak memory (ru_maxrss): {peak_mib():.0f} MiB")


if __name__ == "__main__":
    main()
