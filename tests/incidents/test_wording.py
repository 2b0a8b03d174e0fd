"""Wording of the timeline and of derived facts: nothing reads "None" where a value is absent."""

from __future__ import annotations

from datetime import timedelta

from django.test import SimpleTestCase

from collectors.models import EntityVersion
from incidents.diagnosis.policy import quota_fact
from incidents.diagnosis.quota import QuotaAt
from incidents.diagnosis.types import DiagnosisInput
from incidents.evidence import state_summary
from tests.base import T0


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
