"""What HTTPS and server-side Tables cost the simulated API server (not a test; prints figures).

The same store served twice, over HTTPS (as SimServer does) and over plain HTTP (a second
KubeAPIServer without TLS on the same store): the full pod list of a 1,000-node / 20,000-pod fleet
read raw, through the kubernetes client (``_preload_content=False`` + json.loads), and as kubectl's
Table pages of 500. Rounds alternate the two servers so machine drift hits both; medians printed.

    .venv/bin/python bench/kube_tls.py [--nodes 1000] [--pods 20000] [--rounds 3]

It measures the simulator alone, so it uses it directly: ``SimServer`` (``simulator``'s public API) and a
second ``simulator.apiserver.KubeAPIServer`` on its store; no sweep, no intake.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from simulator import SimServer  # noqa: E402
from simulator.apiserver import KubeAPIServer  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sim import FleetState  # noqa: E402

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io"


def fetch(url: str, token: str, context: object, accept: str = "application/json") -> bytes:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}", "Accept": accept})
    with urllib.request.urlopen(req, context=context, timeout=120) as resp:  # type: ignore[arg-type]
        return resp.read()


def raw_list(base: str, token: str, context: object) -> float:
    t = time.perf_counter()
    fetch(base + "/api/v1/pods", token, context)
    return time.perf_counter() - t


def decoded_list(base: str, token: str, context: object) -> float:
    t = time.perf_counter()
    json.loads(fetch(base + "/api/v1/pods", token, context))
    return time.perf_counter() - t


def table_pages(base: str, token: str, context: object) -> float:
    t, token_ = time.perf_counter(), ""
    while True:
        query = urllib.parse.urlencode({"limit": 500, **({"continue": token_} if token_ else {})})
        page = json.loads(fetch(f"{base}/api/v1/pods?{query}", token, context, TABLE))
        token_ = page["metadata"].get("continue") or ""
        if not token_:
            return time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    world = FleetState(args.nodes, args.pods)
    with SimServer(world, alert_sink=lambda payload: None) as server:
        plain = KubeAPIServer(world, server.store, server.lock, server.kube_token)
        plain.start()
        try:
            tls_ctx = server.kube_tls.client_context()
            targets = {"https": (server.kube_url, tls_ctx), "http": (plain.url, None)}
            size = len(fetch(server.kube_url + "/api/v1/pods", server.kube_token, tls_ctx))
            print(f"{len(server.store.entries['pods'])} pods, list body {size / 1e6:.1f} MB")
            for label, fn in (
                ("raw list", raw_list),
                ("list + json.loads", decoded_list),
                ("Table pages of 500", table_pages),
            ):
                times: dict[str, list[float]] = {"https": [], "http": []}
                for _ in range(args.rounds):
                    for scheme, (base, ctx) in targets.items():
                        times[scheme].append(fn(base, server.kube_token, ctx))
                https, http = statistics.median(times["https"]), statistics.median(times["http"])
                print(f"{label:>20}: https {https:.2f} s, http {http:.2f} s (TLS +{https - http:.2f} s)")
        finally:
            plain.stop()


if __name__ == "__main__":
    main()
