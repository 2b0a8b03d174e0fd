"""Run every check over one DiagnosisInput and rank the result (pure: no database, no sources)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from incidents.diagnosis.actions import propose
from incidents.diagnosis.changes import check_changes
from incidents.diagnosis.efficiency import check_efficiency
from incidents.diagnosis.health import check_health
from incidents.diagnosis.rank import finalize
from incidents.diagnosis.relevance import CAUSE
from incidents.diagnosis.scheduling import check_scheduling
from incidents.diagnosis.types import ActionDraft, DiagnosisInput, Finding
from incidents.diagnosis.workloads import check_workloads

logger = logging.getLogger(__name__)

CHECKS = (check_scheduling, check_health, check_workloads, check_efficiency, check_changes)


@dataclass
class Diagnosis:
    findings: list[Finding] = field(default_factory=list)  # rank order
    actions: list[ActionDraft] = field(default_factory=list)


def run_checks(di: DiagnosisInput) -> Diagnosis:
    """All findings with at least one citation, ranked, and actions for the top ones."""
    raw: list[Finding] = []
    with di.indexed():  # the checks only read the input: look entities up by index, not by scanning the fleet
        for check in CHECKS:
            try:
                raw.extend(check(di))
            except Exception:  # one broken check must not hide what the others found
                logger.exception("diagnosis check %s failed", check.__name__)
        cited = [f for f in raw if f.cites]
        ranked = finalize(di, cited)
        # Actions answer causes only: never drain a node the subject does not need.
        causes = [f for f in ranked if f.scope == CAUSE]
        return Diagnosis(findings=ranked, actions=propose(di, causes))
