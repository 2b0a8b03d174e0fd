"""How many GPUs the idle-allocation rule flags on a real scrape: the shipped rule against the old one.

Serves a scenario (default the demo, ``dcgm_labels: scraped`` as after gpu-operator's ServiceMonitor) at a
moment, lets Debian's /usr/bin/prometheus scrape it with the config `manage.py simulate` prints, evaluates
both rules there, and prints the GPUs each has pending against the simulator's truth (GPUs a pod holds
with SM activity < 0.1, on Ready nodes). Needs the ``prometheus`` package.

    python bench/rules_flood.py [--scenario simulator/scenarios/demo.yaml] [--at 6h]

It measures the simulator's metrics against the shipped rules alone (no sweep, no intake), so it uses the
simulator directly: its public API (``World``, ``load_scenario``, ``SimServer``) and Prometheus' duration
grammar (``simulator.prometheus.promql``).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from datetime import timedelta
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simulator import SimServer, World, load_scenario  # noqa: E402
from simulator.prometheus.promql import parse_duration  # noqa: E402

OLD_IDLE = 'avg_over_time(DCGM_FI_PROF_SM_ACTIVE{pod!=""}[1h]) < 0.1'  # deploy/ before issue 16


def _query(url: str, q: str) -> list[dict]:
    with urllib.request.urlopen(
        f"{url}/api/v1/query?{urllib.parse.urlencode({'query': q})}", timeout=10
    ) as r:
        return json.loads(r.read())["data"]["result"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", default=str(ROOT / "simulator/scenarios/demo.yaml"))
    ap.add_argument("--at", default="6h", help="offset from the scenario's start (default 6h)")
    args = ap.parse_args()
    binary = shutil.which("prometheus") or sys.exit("prometheus is not installed (Debian package prometheus)")
    text = Path(args.scenario).read_text()
    # the scenario as scraped by a ServiceMonitor, whatever label variant it names
    text = re.sub(r"(?m)^  dcgm_labels: \w+\n", "", text)
    scenario = load_scenario(text.replace("cluster:\n", "cluster:\n  dcgm_labels: scraped\n", 1))
    assert scenario.cluster.dcgm_labels == "scraped"
    world = World.from_scenario(scenario)
    world.advance_to(world.start + timedelta(seconds=parse_duration(args.at)))
    truth = {
        (n.name, g.index)
        for n in world.nodes.values()
        for g in n.gpus
        if n.ready
        and g.present
        and g.pod
        and (world.gpu_metric(n.name, g.index, "DCGM_FI_PROF_SM_ACTIVE") or 0) < 0.1
    }
    work = Path(tempfile.mkdtemp(prefix="rules-flood-"))
    crd = yaml.safe_load((ROOT / "deploy/prometheusrules.yaml").read_text())
    groups = crd["spec"]["groups"] + [
        {"name": "old", "rules": [{"alert": "OldGPUIdleAllocated", "expr": OLD_IDLE, "for": "1h"}]}
    ]
    (work / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}))
    with SimServer(world) as sim:
        config = Path(sim.write_scrape_config(str(work / "prometheus.yml"), scrape_interval_s=1))
        loaded = yaml.safe_load(config.read_text())
        loaded["rule_files"] = [str(work / "rules.yaml")]
        config.write_text(yaml.safe_dump(loaded))
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={work / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                try:
                    if len(_query(url, "count_over_time(up[1m]) >= 3")) == len(world.nodes) + 1:
                        break
                except OSError:
                    pass
                time.sleep(0.5)
            time.sleep(3)  # a few rule evaluations (every second)
            new = _query(url, 'ALERTS{alertname="GPUIdleAllocated"}')
            old = _query(url, 'ALERTS{alertname="OldGPUIdleAllocated"}')
            targets = _query(url, "up")
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    shutil.rmtree(work, ignore_errors=True)
    exporter_named = sum(1 for a in old if a["metric"].get("pod", "").startswith("nvidia-dcgm-exporter"))
    print(
        f"scenario {scenario.name} at +{args.at}: {len(world.nodes)} nodes, {sum(len(n.gpus) for n in world.nodes.values())} GPUs, "
        f"{sum(1 for t in targets if t['value'][1] == '1')}/{len(targets)} targets up"
    )
    print(f"idle allocated GPUs (simulator's truth): {len(truth)}")
    print(
        f"shipped GPUIdleAllocated pending:       {len(new)}  "
        f"(match the truth: { ({(a['metric']['Hostname'], int(a['metric']['gpu'])) for a in new} == truth) })"
    )
    print(
        f'old rule {{pod!=""}} pending:             {len(old)}  (naming the exporter pod as holder: {exporter_named})'
    )


if __name__ == "__main__":
    main()
