"""Benchmark the simulated cluster's servers at fleet scale (not a test; prints figures).

A 1,000-node / 8,000-GPU / 20,000-pod KAI cluster over 6 simulated hours:
ticks per second (world + API store sync + alert sender), the time to serve
the full pod list through the official kubernetes client (paginated and not,
and the raw HTTP body alone), and peak memory. Target: the full pod list
serves in under 3 s.

    .venv/bin/python bench/sim.py [--nodes 1000] [--pods 20000] [--hours 6] [--tick 60]
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kubernetes import client, config  # noqa: E402

from collectors.sim.engine.world import World  # noqa: E402
from collectors.sim.scenario import load_scenario  # noqa: E402
from collectors.sim.server import SimServer  # noqa: E402

PROJECTS = 200


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
    args = parser.parse_args()

    t = time.perf_counter()
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
        verdict = "meets" if raw_s < 3 else "misses"
        print(f"target: the full pod list serves in under 3 s -> {verdict} ({raw_s:.2f} s raw)")
    print(f"peak memory (ru_maxrss): {peak_mib():.0f} MiB")


if __name__ == "__main__":
    main()
