"""Scenario files (docs/scenarios.md §2, format 1): loading, validation and the parsed model."""

from __future__ import annotations

from ..durations import scenario_seconds as parse_duration
from .jobs import expand_generate
from .loader import ScenarioError, load_scenario, node_name
from .model import (
    ALERT_NAMES,
    DIAGNOSIS_CODES,
    EVENT_ACTIONS,
    AlertRuleSpec,
    ClusterSpec,
    EventSpec,
    ExpectSpec,
    FailureSpec,
    GenerateSpec,
    JobSpec,
    NodePoolSpec,
    ProjectSpec,
    Scenario,
)

__all__ = [
    "ALERT_NAMES",
    "DIAGNOSIS_CODES",
    "EVENT_ACTIONS",
    "AlertRuleSpec",
    "ClusterSpec",
    "EventSpec",
    "ExpectSpec",
    "FailureSpec",
    "GenerateSpec",
    "JobSpec",
    "NodePoolSpec",
    "ProjectSpec",
    "Scenario",
    "ScenarioError",
    "expand_generate",
    "load_scenario",
    "node_name",
    "parse_duration",
]
