"""``load_scenario``: read a scenario file into a validated ``Scenario``.

Every key of SCENARIOS.md (format 1) is read here and nothing else is
accepted: an unknown key is an error naming the key and its line, so a typo
can never silently change what a scenario simulates. All problems are
collected and raised together in one ``ScenarioError``.
"""

from __future__ import annotations

import logging
import random
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from .model import (
    DCGM_LABEL_STYLES,
    FAILURE_KINDS,
    GPU_MEMORY_MIB,
    JOB_PRIORITIES,
    SCHEDULERS,
    TAINT_EFFECTS,
    ClusterSpec,
    FailureSpec,
    GenerateSpec,
    JobSpec,
    NodePoolSpec,
    ProjectSpec,
    Scenario,
)
from .nodes import Reader, line_of, parse_duration
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
    "projects",
    "jobs",
    "events",
    "alerts",
    "expect",
)
GENERATED_IMAGE = "nvcr.io/nvidia/pytorch:24.08-py3"


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
    loader = yaml.SafeLoader(text)
    try:
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
    cluster = _read_cluster(r, top.get("cluster"))
    projects = _read_projects(r, top.get("projects"))
    # Names declared by entries that had other problems still count as known, so one typo
    # does not cascade into "unknown project/job" everywhere that name is used.
    project_names = {p.name for p in projects} | _declared_names(r, top.get("projects"))
    jobs, generate = _read_jobs(r, top.get("jobs"), project_names, seed or 0)
    job_names = {j.name for j in jobs} | _declared_names(r, top.get("jobs"))
    events = read_events(r, top.get("events"), cluster, project_names, job_names)
    if duration is not None:
        _check_within(r, top.get("jobs"), "jobs", "submit", duration)
        _check_within(r, top.get("events"), "events", "at", duration)
    alerts = read_alerts(r, top.get("alerts"))
    expect = read_expect(r, top.get("expect"), alerts, cluster, events, project_names, job_names)
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
    )


def _check_within(r: Reader, node: yaml.Node | None, section: str, key: str, duration: int) -> None:
    """An offset past the end would silently never happen: most likely a typo."""
    if not isinstance(node, yaml.SequenceNode):
        return
    for i, item in enumerate(node.value):
        if not isinstance(item, yaml.MappingNode):
            continue
        for k, v in item.value:
            if r._safe(k) == key:
                value = r._safe(v)
                seconds = parse_duration(value) if isinstance(value, str) else None
                if seconds is not None and seconds > duration:
                    r.problem(
                        f"{section}[{i}].{key}",
                        v,
                        f"{value} is after the end of the scenario (duration {r._safe_text(duration)})",
                    )


def _declared_names(r: Reader, node: yaml.Node | None) -> set[str]:
    out: set[str] = set()
    if isinstance(node, yaml.SequenceNode):
        for item in node.value:
            if isinstance(item, yaml.MappingNode):
                for k, v in item.value:
                    if r._safe(k) == "name" and isinstance(r._safe(v), str):
                        out.add(r._safe(v))
    return out


def _read_start(
    r: Reader, node: yaml.Node | None, duration: int | None, now: datetime | None
) -> datetime | None:
    if node is None:
        end = (now or datetime.now(UTC)).astimezone(UTC).replace(second=0, microsecond=0)
        return end - timedelta(seconds=duration or 0)
    value = r._safe(node)
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            value = None
    if not isinstance(value, datetime) or value.tzinfo is None:
        r.problem("start", node, f"expected a UTC timestamp like 2026-11-29T00:00:00Z, got {node.value!r}")
        return None
    return value.astimezone(UTC)


def _gpu_memory(product: str) -> int | None:
    if product in GPU_MEMORY_MIB:
        return GPU_MEMORY_MIB[product]
    m = re.search(r"(\d+)GB", product)
    return int(m.group(1)) * 1024 if m else None


def read_taint(r: Reader, node: yaml.Node, path: str, *, for_removal: bool = False) -> dict[str, str] | None:
    required = ("key",) if for_removal else ("key", "effect")
    keys = r.mapping(node, path, ("key", "value", "effect"), required=required)
    if keys is None:
        return None
    key = r.string(keys.get("key"), f"{path}.key")
    value = r.string(keys.get("value"), f"{path}.value") if "value" in keys else ""
    effect = r.choice(keys.get("effect"), f"{path}.effect", TAINT_EFFECTS) if "effect" in keys else ""
    if key is None or value is None or effect is None:
        return None
    out = {"key": key, "effect": effect}
    if value:
        out["value"] = value
    return out


def _read_cluster(r: Reader, node: yaml.Node | None) -> ClusterSpec | None:
    keys = r.mapping(
        node,
        "cluster",
        ("name", "scheduler", "dcgm_labels", "nodepools"),
        required=("name", "scheduler", "nodepools"),
    )
    if keys is None:
        return None
    name = r.string(keys.get("name"), "cluster.name", slug=True)
    scheduler = r.choice(keys.get("scheduler"), "cluster.scheduler", SCHEDULERS)
    dcgm = (
        r.choice(keys.get("dcgm_labels"), "cluster.dcgm_labels", DCGM_LABEL_STYLES)
        if "dcgm_labels" in keys
        else "classic"
    )
    pools: list[NodePoolSpec] = []
    seen: set[str] = set()
    for i, pnode in enumerate(r.sequence(keys.get("nodepools"), "cluster.nodepools") or []):
        path = f"cluster.nodepools[{i}]"
        pk = r.mapping(
            pnode,
            path,
            ("name", "nodes", "gpus_per_node", "gpu_product", "labels", "taints"),
            required=("name", "nodes", "gpus_per_node", "gpu_product"),
        )
        if pk is None:
            continue
        pname = r.string(pk.get("name"), f"{path}.name", slug=True)
        nodes = r.integer(pk.get("nodes"), f"{path}.nodes", minimum=0)
        gpn = r.integer(pk.get("gpus_per_node"), f"{path}.gpus_per_node", minimum=1)
        product = r.string(pk.get("gpu_product"), f"{path}.gpu_product")
        labels = r.string_map(pk.get("labels"), f"{path}.labels") if "labels" in pk else {}
        taints = []
        for j, tnode in enumerate(r.sequence(pk.get("taints"), f"{path}.taints") or []):
            t = read_taint(r, tnode, f"{path}.taints[{j}]")
            if t:
                taints.append(t)
        mem = _gpu_memory(product) if product else None
        if product and mem is None:
            r.problem(
                f"{path}.gpu_product",
                pk["gpu_product"],
                f"unknown GPU product {product!r}: use a GPU feature discovery name such as "
                f"{', '.join(sorted(GPU_MEMORY_MIB)[:4])}… or one containing '<n>GB'",
            )
        if pname in seen:
            r.problem(f"{path}.name", pk.get("name"), f"duplicate nodepool name {pname!r}")
        if pname:
            seen.add(pname)
        if None in (pname, nodes, gpn, product, mem, labels):
            continue
        pools.append(NodePoolSpec(pname, nodes, gpn, product, mem, labels, tuple(taints), line_of(pnode)))  # type: ignore[arg-type]
    if not pools and keys.get("nodepools") is not None and not r.problems:
        r.problem("cluster.nodepools", keys["nodepools"], "at least one nodepool is needed")
    if None in (name, scheduler, dcgm):
        return None
    return ClusterSpec(name, scheduler, dcgm, tuple(pools), line_of(node))  # type: ignore[arg-type]


def _gpu_amount(r: Reader, node: yaml.Node | None, path: str) -> int | None:
    keys = r.mapping(node, path, ("gpu",), required=("gpu",))
    if keys is None:
        return None
    return r.integer(keys.get("gpu"), f"{path}.gpu", minimum=0)


def _read_projects(r: Reader, node: yaml.Node | None) -> list[ProjectSpec]:
    out: list[ProjectSpec] = []
    seen: set[str] = set()
    for i, pnode in enumerate(r.sequence(node, "projects") or []):
        path = f"projects[{i}]"
        pk = r.mapping(
            pnode,
            path,
            ("name", "namespace", "quota", "limit", "over_quota_weight", "priority"),
            required=("name", "quota"),
        )
        if pk is None:
            continue
        name = r.string(pk.get("name"), f"{path}.name", slug=True)
        namespace = (
            r.string(pk.get("namespace"), f"{path}.namespace", slug=True) if "namespace" in pk else name
        )
        quota = _gpu_amount(r, pk.get("quota"), f"{path}.quota")
        limit = _gpu_amount(r, pk.get("limit"), f"{path}.limit") if "limit" in pk else None
        weight = (
            r.integer(pk.get("over_quota_weight"), f"{path}.over_quota_weight", minimum=0)
            if "over_quota_weight" in pk
            else 1
        )
        prio = r.integer(pk.get("priority"), f"{path}.priority") if "priority" in pk else 0
        if quota is not None and limit is not None and limit < quota:
            r.problem(f"{path}.limit", pk["limit"], f"limit ({limit}) is below quota ({quota})")
        if name in seen:
            r.problem(f"{path}.name", pk.get("name"), f"duplicate project name {name!r}")
        if name:
            seen.add(name)
        if None in (name, namespace, quota, weight, prio):
            continue
        out.append(ProjectSpec(name, namespace, quota, limit, weight, prio, line_of(pnode)))  # type: ignore[arg-type]
    return out


JOB_KEYS = (
    "name",
    "project",
    "submit",
    "pods",
    "gpus_per_pod",
    "priority",
    "runtime",
    "image",
    "node_selector",
    "tolerations",
    "sm_activity",
    "failure",
)
GENERATE_KEYS = ("count", "project", "pods", "gpus_per_pod", "submit_every", "runtime", "name_prefix")


def read_toleration(r: Reader, node: yaml.Node, path: str) -> dict[str, Any] | None:
    keys = r.mapping(node, path, ("key", "operator", "value", "effect", "tolerationSeconds"))
    if keys is None:
        return None
    tol: dict[str, Any] = {}
    for k in ("key", "value"):
        if k in keys:
            v = r.string(keys[k], f"{path}.{k}")
            if v is None:
                return None
            tol[k] = v
    if "operator" in keys:
        op = r.choice(keys["operator"], f"{path}.operator", ("Equal", "Exists"))
        if op is None:
            return None
        tol["operator"] = op
    if "effect" in keys:
        eff = r.choice(keys["effect"], f"{path}.effect", TAINT_EFFECTS)
        if eff is None:
            return None
        tol["effect"] = eff
    if "tolerationSeconds" in keys:
        secs = r.integer(keys["tolerationSeconds"], f"{path}.tolerationSeconds", minimum=0)
        if secs is None:
            return None
        tol["tolerationSeconds"] = secs
    if tol.get("operator", "Equal") == "Exists" and tol.get("value"):
        r.problem(
            f"{path}.value", keys.get("value"), "a toleration with operator Exists must not have a value"
        )
        return None
    return tol


def _read_failure(r: Reader, node: yaml.Node | None, path: str) -> FailureSpec | None:
    keys = r.mapping(node, path, ("kind", "log", "exit_code"), required=("kind",))
    if keys is None:
        return None
    kind = r.choice(keys.get("kind"), f"{path}.kind", FAILURE_KINDS)
    log = r.string(keys.get("log"), f"{path}.log") if "log" in keys else None
    code = r.integer(keys.get("exit_code"), f"{path}.exit_code", minimum=0) if "exit_code" in keys else None
    if kind is None:
        return None
    return FailureSpec(kind, log, code)


def _read_jobs(
    r: Reader, node: yaml.Node | None, projects: set[str], seed: int
) -> tuple[list[JobSpec], list[GenerateSpec]]:
    jobs: list[JobSpec] = []
    gens: list[GenerateSpec] = []
    for i, jnode in enumerate(r.sequence(node, "jobs") or []):
        path = f"jobs[{i}]"
        if isinstance(jnode, yaml.MappingNode) and any(r._safe(k) == "generate" for k, _ in jnode.value):
            wrap = r.mapping(jnode, path, ("generate",), required=("generate",))
            if wrap and "generate" in wrap:
                g = _read_generate(r, wrap["generate"], f"{path}.generate", projects)
                if g:
                    gens.append(g)
            continue
        j = _read_job(r, jnode, path, projects)
        if j:
            jobs.append(j)
    for gi, g in enumerate(gens):
        jobs.extend(expand_generate(g, seed, gi))
    seen: dict[str, int] = {}
    for j in jobs:
        if j.name in seen:
            r.problem(
                "jobs",
                None,
                f"duplicate job name {j.name!r} (lines {seen[j.name]} and {j.line})",
                line=j.line,
            )
        seen[j.name] = j.line
    return jobs, gens


def _read_job(r: Reader, node: yaml.Node, path: str, projects: set[str]) -> JobSpec | None:
    k = r.mapping(node, path, JOB_KEYS, required=("name", "project", "submit", "pods", "gpus_per_pod"))
    if k is None:
        return None
    name = r.string(k.get("name"), f"{path}.name", slug=True)
    project = r.string(k.get("project"), f"{path}.project")
    if project is not None and project not in projects:
        r.problem(f"{path}.project", k["project"], f"unknown project {project!r}")
        project = None
    submit = r.duration(k.get("submit"), f"{path}.submit")
    pods = r.integer(k.get("pods"), f"{path}.pods", minimum=1)
    gpp = r.integer(k.get("gpus_per_pod"), f"{path}.gpus_per_pod", minimum=0)
    prio = r.choice(k.get("priority"), f"{path}.priority", JOB_PRIORITIES) if "priority" in k else "train"
    runtime = r.duration(k.get("runtime"), f"{path}.runtime", positive=True) if "runtime" in k else None
    image = r.string(k.get("image"), f"{path}.image") if "image" in k else GENERATED_IMAGE
    selector = r.string_map(k.get("node_selector"), f"{path}.node_selector") if "node_selector" in k else {}
    tols = []
    for ti, tnode in enumerate(r.sequence(k.get("tolerations"), f"{path}.tolerations") or []):
        t = read_toleration(r, tnode, f"{path}.tolerations[{ti}]")
        if t is not None:
            tols.append(t)
    sm = r.number(k.get("sm_activity"), f"{path}.sm_activity", lo=0.0, hi=1.0) if "sm_activity" in k else 0.7
    failure = _read_failure(r, k.get("failure"), f"{path}.failure") if "failure" in k else None
    if "failure" in k and failure is None:
        return None
    if runtime is not None and "runtime" in k and k["runtime"] is None:
        runtime = None
    if None in (name, project, submit, pods, gpp, prio, image, selector, sm):
        return None
    return JobSpec(
        name,
        project,
        submit,
        pods,
        gpp,
        prio,
        runtime,
        image,
        selector,
        tuple(tols),
        sm,
        failure,  # type: ignore[arg-type]
        None,
        line_of(node),
    )


def _read_generate(r: Reader, node: yaml.Node, path: str, projects: set[str]) -> GenerateSpec | None:
    k = r.mapping(node, path, GENERATE_KEYS, required=GENERATE_KEYS[:-1])
    if k is None:
        return None
    count = r.integer(k.get("count"), f"{path}.count", minimum=0)
    project = r.string(k.get("project"), f"{path}.project")
    if project is not None and project not in projects:
        r.problem(f"{path}.project", k["project"], f"unknown project {project!r}")
        project = None
    pods = r.integer(k.get("pods"), f"{path}.pods", minimum=1)
    sizes: list[int] = []
    gnode = k.get("gpus_per_pod")
    if gnode is not None:
        if isinstance(gnode, yaml.SequenceNode):
            for si, snode in enumerate(gnode.value):
                v = r.integer(snode, f"{path}.gpus_per_pod[{si}]", minimum=0)
                if v is not None:
                    sizes.append(v)
            if not gnode.value:
                r.problem(f"{path}.gpus_per_pod", gnode, "expected a non-empty list of integers")
        else:
            v = r.integer(gnode, f"{path}.gpus_per_pod", minimum=0)
            if v is not None:
                sizes.append(v)
    every = r.duration(k.get("submit_every"), f"{path}.submit_every", positive=True)
    rt: tuple[int, int] | None = None
    rnode = k.get("runtime")
    if rnode is not None:
        items = r.sequence(rnode, f"{path}.runtime")
        if items is not None:
            if len(items) != 2:
                r.problem(f"{path}.runtime", rnode, f"expected [min, max], got a list of {len(items)}")
            else:
                lo = r.duration(items[0], f"{path}.runtime[0]", positive=True)
                hi = r.duration(items[1], f"{path}.runtime[1]", positive=True)
                if lo is not None and hi is not None:
                    if hi < lo:
                        r.problem(f"{path}.runtime", rnode, "max runtime is below min runtime")
                    else:
                        rt = (lo, hi)
    prefix = (
        r.string(k.get("name_prefix"), f"{path}.name_prefix", slug=True)
        if "name_prefix" in k
        else f"{project}-batch"
    )
    if None in (count, project, pods, every, rt, prefix) or not sizes:
        return None
    return GenerateSpec(count, project, pods, tuple(sizes), every, rt, prefix, line_of(node))  # type: ignore[arg-type]


def expand_generate(g: GenerateSpec, seed: int, index: int) -> list[JobSpec]:
    """The jobs a generate entry stands for: same seed, same jobs (string seeds hash with SHA-512)."""
    rng = random.Random(f"rcaweb-sim:{seed}:generate:{index}:{g.name_prefix}")
    width = max(3, len(str(g.count)))
    out = []
    for n in range(g.count):
        jitter = rng.randint(0, max(0, g.submit_every_s // 2))
        out.append(
            JobSpec(
                name=f"{g.name_prefix}-{n + 1:0{width}d}",
                project=g.project,
                submit_s=n * g.submit_every_s + jitter,
                pods=g.pods,
                gpus_per_pod=rng.choice(g.gpus_per_pod),
                runtime_s=rng.randint(g.runtime_s[0] // 60, g.runtime_s[1] // 60) * 60,
                image=GENERATED_IMAGE,
                sm_activity=round(rng.uniform(0.35, 0.9), 2),
                generated_by=g.name_prefix,
                line=g.line,
            )
        )
    return out
