"""``load_scenario``: read a scenario file into a validated ``Scenario``.

Every key of docs/scenarios.md (§2, format 1) is read here and nothing else is
accepted: an unknown key is an error naming the key and its line, so a typo
can never silently change what a scenario simulates. All problems are
collected and raised together in one ``ScenarioError``.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

from ..durations import compact
from ..durations import scenario_seconds as parse_duration
from .cluster import read_cluster, read_departments, read_projects
from .jobs import read_jobs
from .kueue import read_kueue
from .limits import kai_only_queues
from .model import (
    Scenario,
)
from .nodes import Reader
from .reference import read_reference
from .sections import read_alerts, read_events, read_expect

logger = logging.getLogger(__name__)

TOP_KEYS = (
    "format",
    "name",
    "summary",
    "start",
    "duration",
    "seed",
    "cluster",
    "departments",
    "projects",
    "jobs",
    "events",
    "alerts",
    "expect",
    "kueue",
    "reference",
)


class ScenarioError(ValueError):
    """A scenario file that cannot be simulated; ``problems`` lists every reason with its line."""

    def __init__(self, problems: list[tuple[str, int, str]], source: str | None = None) -> None:
        self.problems = problems
        self.source = source
        lines = [
            f"{path} (line {line}): {msg}" if path else f"(line {line}): {msg}"
            for path, line, msg in problems
        ]
        head = f"{source}: " if source else ""
        super().__init__(head + f"{len(problems)} problem(s) in scenario:\n" + "\n".join(lines))


def node_name(pool: str, number: int, pool_size: int) -> str:
    """``h100-01``: zero-padded to the width of the largest number, at least two digits."""
    width = max(2, len(str(pool_size)))
    return f"{pool}-{number:0{width}d}"


def load_scenario(path_or_text: str | Path, *, now: datetime | None = None) -> Scenario:
    """Load and validate a scenario from a file path or from YAML text.

    ``now`` (aware UTC) is only used when the file has no ``start``: the run
    then ends at ``now`` rounded down to the minute.
    """
    source: str | None = None
    if isinstance(path_or_text, Path) or (
        "\n" not in str(path_or_text) and str(path_or_text).endswith((".yaml", ".yml"))
    ):
        source = str(path_or_text)
        try:
            text = Path(path_or_text).read_text(encoding="utf-8")
        except OSError as exc:
            raise ScenarioError([("", 0, f"cannot read file: {exc}")], source) from exc
    else:
        text = str(path_or_text)
    # libyaml's parser when PyYAML has it (a trace of 8,000 jobs parses several times faster); a file it
    # refuses is parsed again by the pure-Python one, whose words the problem then quotes.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        try:
            root = loader.get_single_node()
        except yaml.MarkedYAMLError:
            loader.dispose()
            loader = yaml.SafeLoader(text)
            try:
                root = loader.get_single_node()
            except yaml.MarkedYAMLError as exc:
                line = exc.problem_mark.line + 1 if exc.problem_mark else 0
                raise ScenarioError([("", line, f"not valid YAML: {exc.problem}")], source) from exc
        if root is None:
            raise ScenarioError([("", 1, "the file is empty")], source)
        reader = Reader(loader)
        scenario = _read(reader, root, source, now)
    finally:
        loader.dispose()
    if reader.problems or scenario is None:
        raise ScenarioError(reader.problems or [("", 0, "invalid scenario")], source)
    return scenario


def _read(r: Reader, root: yaml.Node, source: str | None, now: datetime | None) -> Scenario | None:
    top = r.mapping(
        root, "", TOP_KEYS, required=("format", "name", "duration", "seed", "cluster", "projects")
    )
    if top is None:
        return None
    fmt = r.integer(top.get("format"), "format")
    if fmt is not None and fmt != 1:
        r.problem("format", top["format"], f"unsupported format {fmt}; this simulator reads format 1")
    name = r.string(top.get("name"), "name", slug=True)
    summary = r.string(top.get("summary"), "summary") if "summary" in top else ""
    duration = r.duration(top.get("duration"), "duration", positive=True)
    seed = r.integer(top.get("seed"), "seed")
    start = _read_start(r, top.get("start"), duration, now)
    cluster = read_cluster(r, top.get("cluster"))
    departments = read_departments(r, top.get("departments"))
    department_names = {d.name for d in departments} | _declared_names(r, top.get("departments"))
    projects = read_projects(r, top.get("projects"), department_names)
    # Names declared by entries that had other problems still count as known, so one typo
    # does not cascade into "unknown project/job" everywhere that name is used.
    project_names = {p.name for p in projects} | _declared_names(r, top.get("projects"))
    jobs, generate = read_jobs(r, top.get("jobs"), project_names, seed or 0, cluster)
    job_names = {j.name for j in jobs} | _declared_names(r, top.get("jobs"))
    events = read_events(r, top.get("events"), cluster, project_names, job_names, department_names)
    if duration is not None:
        _check_within(r, top.get("jobs"), "jobs", "submit", duration)
        _check_within(r, top.get("events"), "events", "at", duration)
        _check_within(r, top.get("expect"), "expect", "at", duration)
    alerts = read_alerts(r, top.get("alerts"))
    expect = read_expect(r, top.get("expect"), alerts, cluster, events, project_names, job_names)
    kueue = None
    if "kueue" in top:
        quotas = {p.name: int(p.quota_gpus) for p in projects}  # whole numbers under Kueue (below)
        scheduler = cluster.scheduler if cluster else None
        kueue = read_kueue(r, top["kueue"], scheduler, quotas, job_names, bool(departments))
    reference = read_reference(r, top["reference"], cluster, job_names) if "reference" in top else None
    if cluster is not None and cluster.scheduler != "kai":
        kai_only_queues(r, departments, projects)
    if r.problems or None in (fmt, name, duration, seed, start, cluster):
        return None
    assert name is not None and duration is not None and seed is not None and start is not None
    assert cluster is not None and fmt is not None
    return Scenario(
        format=fmt,
        name=name,
        summary=summary or "",
        start=start,
        duration_s=duration,
        seed=seed,
        cluster=cluster,
        projects=tuple(projects),
        jobs=tuple(jobs),
        generate=tuple(generate),
        events=tuple(sorted(events, key=lambda e: e.at_s)),
        alerts=tuple(alerts),
        expect=tuple(expect),
        source=source,
        departments=tuple(departments),
        kueue=kueue,
        reference=reference,
    )


def _check_within(r: Reader, node: yaml.Node | None, section: str, key: str, duration: int) -> None:
    """An offset past the end would silently never happen: most likely a typo."""
    if not isinstance(node, yaml.SequenceNode):
        return
    for i, item in enumerate(node.value):
        if not isinstance(item, yaml.MappingNode):
            continue
        for k, v in item.value:
            if r.safe(k) == key:
                value = r.safe(v)
                seconds = parse_duration(value) if isinstance(value, str) else None
                if seconds is not None and seconds > duration:
                    r.problem(
                        f"{section}[{i}].{key}",
                        v,
                        f"{value} is after the end of the scenario (duration {compact(duration)})",
                    )


def _declared_names(r: Reader, node: yaml.Node | None) -> set[str]:
    out: set[str] = set()
    if isinstance(node, yaml.SequenceNode):
        for item in node.value:
            if isinstance(item, yaml.MappingNode):
                for k, v in item.value:
                    if r.safe(k) == "name" and isinstance(r.safe(v), str):
                        out.add(r.safe(v))
    return out


def _read_start(
    r: Reader, node: yaml.Node | None, duration: int | None, now: datetime | None
) -> datetime | None:
    if node is None:
        end = (now or datetime.now(UTC)).astimezone(UTC).replace(second=0, microsecond=0)
        return end - timedelta(seconds=duration or 0)
    value = r.safe(node)
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            value = None
    if not isinstance(value, datetime) or value.tzinfo is None:
        r.problem("start", node, f"expected a UTC timestamp like 2026-11-29T00:00:00Z, got {node.value!r}")
        return None
    return value.astimezone(UTC)
