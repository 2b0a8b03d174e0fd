"""Wording of the timeline and of derived facts: nothing reads "None" where a value is absent."""

from __future__ import annotations

from datetime import timedelta

from django.test import SimpleTestCase

from collectors.models import Change, Entity, EntityVersion
from incidents.diagnosis.quota import QuotaAt
from incidents.diagnosis.quota_causes import quota_fact
from incidents.diagnosis.types import DiagnosisInput
from incidents.evidence import collect_changes, state_summary
from incidents.models import Incident
from incidents.observation_batch import Batch
from tests.base import T0, BaseTestCase


class LimitWordingTest(SimpleTestCase):
    def test_it_says_no_limit_in_the_timeline_when_a_project_has_none(self) -> None:
        v = EntityVersion(state={"quota_gpus": 8, "limit_gpus": None}, phase="", valid_from=T0)
        assert state_summary("project", "llm", v) == "project llm · quota 8 GPUs, no limit"

    def test_it_keeps_a_real_limit_in_the_timeline(self) -> None:
        v = EntityVersion(state={"quota_gpus": 8, "limit_gpus": 12}, phase="", valid_from=T0)
        assert state_summary("queue", "llm", v) == "queue llm · quota 8 GPUs, limit 12"

    def test_it_says_no_limit_in_the_quota_fact(self) -> None:
        di = DiagnosisInput(t=T0, onset=T0 - timedelta(minutes=5), cluster="c")
        q = QuotaAt(
            project="llm",
            queue="llm",
            quota=8,
            limit=None,
            allocated=6,
            requested=4,
            preemptible=True,
            free_for_borrowing=2,
        )
        summary = quota_fact(di, q).summary
        assert "None" not in summary and "of quota 8, no limit;" in summary
        assert "limit 10;" in quota_fact(di, QuotaAt("llm", "llm", 8, 10, 6, 4, True, 2)).summary


class ChangeWordingTest(BaseTestCase):
    def test_the_timeline_names_the_container_field_that_changed(self) -> None:
        pod = Entity.objects.create(
            cluster=self.cluster, kind="pod", namespace="llm", name="train-0", first_seen=T0, last_seen=T0
        )
        runtime = {"gpus": 8, "env": {}, "ready": False, "restart_count": 0}
        Change.objects.create(
            cluster=self.cluster,
            entity=pod,
            kind="pod",
            time=T0,
            field="containers",
            old=[{"name": "main", "image": "nvcr.io/nvidia/pytorch:24.08-py3-research-1.4", **runtime}],
            new=[{"name": "main", "image": "nvcr.io/nvidia/pytorch:24.08-py3-research-1.5", **runtime}],
            actor="ci",
        )
        batch = Batch(incident=Incident(), collected_at=T0)
        collect_changes(batch, [pod], T0 - timedelta(minutes=5), T0 + timedelta(minutes=5))
        (obs,) = batch.items.values()
        assert obs.summary.endswith(
            "containers[main].image: nvcr.io/nvidia/pytorch:24.08-py3-research-1.4 → "
            "nvcr.io/nvidia/pytorch:24.08-py3-research-1.5 by ci"
        ), obs.summary
