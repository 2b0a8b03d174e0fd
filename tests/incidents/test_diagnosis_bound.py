"""A GPU incident's diagnosis input does not grow with the fleet beyond one row per object the checks count.

docs/diagnosis.md "Bounded by the incident": an incident about placed objects (a node, a GPU, a running pod)
reads the history of its own nodes only; of every other node the checks read its current row (the shared
fleet rows) and the most GPUs it reported over the lookback (``DiagnosisInput.peak_gpus``), never its versions.
The same incident on a 2-node and on a 30-node cluster whose every node changed twice in the lookback reads
the same history, the same changes and the same number of queries, and answers what the whole fleet answers.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import connection
from django.test.utils import CaptureQueriesContext

from collectors.inventory import Observed, record_states
from collectors.models import Cluster, Entity, SourceRun
from incidents import snapshot
from incidents.diagnosis.checks import Diagnosis, run_checks
from incidents.diagnosis.types import DiagnosisInput, Ref
from incidents.diagnosis_input import load_incident_input
from incidents.models import Incident, IncidentSubject
from tests.base import T0, BaseTestCase
from tests.incidents.fixtures.alertmanager import gpu_uuid, small_world

ONSET = T0 + timedelta(minutes=5)


def _node(name: str, gpus: int, check: str) -> Observed:
    return Observed(
        "node",
        name,
        {
            "ready": True,
            "unschedulable": False,
            "taints": [],
            "labels": {"kubernetes.io/hostname": name, "nodepool": "h100", "health-check": check},
            "capacity": {"nvidia.com/gpu": gpus},
            "allocatable": {"nvidia.com/gpu": gpus},
        },
        hot={"phase": "Ready", "ready": True, "gpus": gpus, "gpus_allocatable": gpus, "node": name},
    )


def _answer(result: Diagnosis) -> list[Any]:
    return [(f.code, f.status, round(f.confidence, 4), f.statement) for f in result.findings] + [
        (a.code, a.title, a.impact) for a in result.actions
    ]


class GpuIncidentInputTest(BaseTestCase):
    def setUp(self) -> None:
        super().setUp()
        snapshot.forget()
        self.addCleanup(snapshot.forget)

    def world(self, cluster: Cluster, nodes: int) -> Incident:
        small_world(cluster, T0 - timedelta(hours=1), nodes=nodes, pending_job=False)
        names = [f"h100-{i:02d}" for i in range(1, nodes + 1)]
        # Every node changes twice in the lookback; the last one lost a GPU for a while (its peak stays 8).
        record_states(cluster, [_node(n, 8, "a") for n in names], T0 - timedelta(minutes=40))
        record_states(
            cluster, [_node(n, 7 if n == names[-1] else 8, "b") for n in names], T0 - timedelta(minutes=20)
        )
        uuid = gpu_uuid("h100-01", 0)
        record_states(
            cluster,
            [
                Observed(
                    "gpu",
                    uuid,
                    {"node": "h100-01", "index": 0, "uuid": uuid, "present": True, "pod": "", "xid_last": 79},
                    hot={"node": "h100-01", "phase": "ok", "pod": ""},
                )
            ],
            T0,
        )
        SourceRun.objects.create(cluster=cluster, source="k8s", call="list nodes", time=ONSET, ok=True)
        incident = Incident.objects.create(
            title="GPUXidError", cluster=cluster, onset=ONSET, window_start=ONSET - timedelta(hours=1)
        )
        gpu = Entity.objects.get(cluster=cluster, kind="gpu", name=uuid)
        IncidentSubject.objects.create(incident=incident, entity=gpu, role="subject")
        return incident

    def load(self, incident: Incident) -> tuple[DiagnosisInput, int]:
        snapshot.forget()
        with CaptureQueriesContext(connection) as ctx:
            di = load_incident_input(incident, ONSET)
        return di, len(ctx.captured_queries)

    def test_a_gpu_incident_reads_its_own_node_history_whatever_the_fleet(self) -> None:
        small, n_small = self.load(self.world(self.cluster, 2))
        big_cluster = Cluster.objects.create(name="gpu-big", scheduler="kai")
        incident = self.world(big_cluster, 30)
        big, n_big = self.load(incident)

        node_refs = {r for r in big.history if r.kind == "node"}
        self.assertEqual(node_refs, {Ref("node", "h100-01")})
        self.assertEqual(
            {r: len(v) for r, v in big.history.items()},
            {r: len(v) for r, v in small.history.items()},
        )
        self.assertEqual(len(big.changes), len(small.changes))
        self.assertEqual(len(big.events), len(small.events))
        self.assertEqual(n_big, n_small)
        # Of the 29 other nodes, one number each: the most GPUs it reported over the lookback.
        self.assertEqual(len(big.peak_gpus), 29)
        self.assertEqual(big.peak_gpus["h100-30"], 8)
        self.assertEqual(len(big.nodes), 30)

        whole = load_incident_input(incident, ONSET, bounded=False)
        self.assertEqual(len({r for r in whole.history if r.kind == "node"}), 30)
        self.assertEqual(_answer(run_checks(big)), _answer(run_checks(whole)))
