"""Reading ``jobs``: written-out jobs, ``generate`` entries and their reproducible expansion."""

from __future__ import annotations

import random
from typing import Any

import yaml

from .model import FAILURE_KINDS, JOB_PRIORITIES, TAINT_EFFECTS, FailureSpec, GenerateSpec, JobSpec
from .nodes import Reader, line_of

GENERATED_IMAGE = "nvcr.io/nvidia/pytorch:24.08-py3"


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


def read_jobs(
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
