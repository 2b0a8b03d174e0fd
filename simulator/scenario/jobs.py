"""Reading ``jobs``: written-out jobs, ``generate`` entries and their reproducible expansion."""
# size: the jobs section and its generate blocks, read and checked key by key

from __future__ import annotations

import random
from typing import Any

import yaml

from .gpus import MIG_PROFILE_NAMES
from .model import (
    FAILURE_KINDS,
    TAINT_EFFECTS,
    ClusterSpec,
    FailureSpec,
    GenerateSpec,
    JobSpec,
)
from .nodes import Reader, describe, line_of
from .running import read_priority, read_running_on

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
    "gpu_memory",
    "mig_profile",
    "cpu_per_pod",
    "memory_per_pod",
    "running_on",
)
GENERATE_KEYS = (
    "count",
    "project",
    "pods",
    "gpus_per_pod",
    "submit_every",
    "runtime",
    "name_prefix",
    "mig_profile",
    "cpu_per_pod",
    "memory_per_pod",
)
GENERATE_REQUIRED = ("count", "project", "pods", "gpus_per_pod", "submit_every", "runtime")


def read_gpus(r: Reader, node: yaml.Node | None, path: str) -> int | float | None:
    """GPUs per pod: a whole number >= 0, or a fraction strictly between 0 and 1 (a GPU share)."""
    if node is None:
        return None
    value = r.safe(node)
    if isinstance(value, bool) or not isinstance(value, int | float) or not isinstance(node, yaml.ScalarNode):
        r.problem(
            path, node, f"expected an integer or a fraction between 0 and 1, got {describe(node, value)}"
        )
        return None
    if isinstance(value, float) and value.is_integer() and value >= 1:
        value = int(value)
    if isinstance(value, int) and value >= 0:
        return value
    if 0 < value < 1:
        return float(value)
    r.problem(
        path,
        node,
        f"expected a whole number of GPUs (0, 1, 2, ...) or a fraction between 0 and 1, got {value}",
    )
    return None


def _sharing_pools(cluster: ClusterSpec | None) -> list[str] | None:
    return None if cluster is None else [p.name for p in cluster.nodepools if p.sharing]


def _check_share(r: Reader, cluster: ClusterSpec | None, path: str, node: yaml.Node, what: str) -> bool:
    """A GPU share needs a pool with sharing: true (KAI GPU sharing)."""
    pools = _sharing_pools(cluster)
    if pools is not None and not pools:
        r.problem(
            path,
            node,
            f"{what} is a GPU share: it needs a nodepool with sharing: true, and cluster.nodepools has none",
        )
        return False
    return True


def _read_resources(
    r: Reader, k: dict[str, yaml.Node], path: str, gpus: int | float | None, cluster: ClusterSpec | None
) -> tuple[bool, str | None, int | None, int | None]:
    """mig_profile, cpu_per_pod, memory_per_pod of a job or generate entry: (ok, profile, cpu, memory)."""
    ok = True
    profile = None
    if "mig_profile" in k:
        profile = r.string(k["mig_profile"], f"{path}.mig_profile")
        if profile is not None and profile not in MIG_PROFILE_NAMES:
            r.problem(
                f"{path}.mig_profile",
                k["mig_profile"],
                f"unknown MIG profile {profile!r}; profiles are like 1g.10gb, 3g.40gb, 7g.80gb "
                f"({', '.join(sorted(MIG_PROFILE_NAMES))})",
            )
            profile = None
        ok &= profile is not None
    cpu = r.cpu(k.get("cpu_per_pod"), f"{path}.cpu_per_pod") if "cpu_per_pod" in k else None
    mem = r.memory(k.get("memory_per_pod"), f"{path}.memory_per_pod") if "memory_per_pod" in k else None
    ok &= ("cpu_per_pod" not in k or cpu is not None) and ("memory_per_pod" not in k or mem is not None)
    return ok, profile, cpu, mem


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
    r: Reader, node: yaml.Node | None, projects: set[str], seed: int, cluster: ClusterSpec | None = None
) -> tuple[list[JobSpec], list[GenerateSpec]]:
    jobs: list[JobSpec] = []
    gens: list[GenerateSpec] = []
    for i, jnode in enumerate(r.sequence(node, "jobs") or []):
        path = f"jobs[{i}]"
        if isinstance(jnode, yaml.MappingNode) and any(r.safe(k) == "generate" for k, _ in jnode.value):
            wrap = r.mapping(jnode, path, ("generate",), required=("generate",))
            if wrap and "generate" in wrap:
                g = _read_generate(r, wrap["generate"], f"{path}.generate", projects, cluster)
                if g:
                    gens.append(g)
            continue
        j = _read_job(r, jnode, path, projects, cluster)
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


# length: a job's checks key by key, in docs/scenarios.md's order
def _read_job(
    r: Reader, node: yaml.Node, path: str, projects: set[str], cluster: ClusterSpec | None
) -> JobSpec | None:
    k = r.mapping(node, path, JOB_KEYS, required=("name", "project", "submit", "pods"))
    if k is None:
        return None
    if ("gpus_per_pod" in k) == ("gpu_memory" in k):
        r.problem(
            path,
            node,
            "a job needs exactly one of gpus_per_pod or gpu_memory"
            + (" (gpu_memory sizes the share instead of gpus_per_pod)" if "gpu_memory" in k else ""),
        )
        return None
    name = r.string(k.get("name"), f"{path}.name", slug=True)
    project = r.string(k.get("project"), f"{path}.project")
    if project is not None and project not in projects:
        r.problem(f"{path}.project", k["project"], f"unknown project {project!r}")
        project = None
    submit = r.duration(k.get("submit"), f"{path}.submit")
    pods = r.integer(k.get("pods"), f"{path}.pods", minimum=1)
    gpp: int | float | None = 0
    gmem: int | None = None
    if "gpus_per_pod" in k:
        gpp = read_gpus(r, k["gpus_per_pod"], f"{path}.gpus_per_pod")
        if isinstance(gpp, float) and not _check_share(
            r, cluster, f"{path}.gpus_per_pod", k["gpus_per_pod"], f"gpus_per_pod {gpp}"
        ):
            gpp = None
    else:
        mem_bytes = r.memory(k["gpu_memory"], f"{path}.gpu_memory")
        gmem = None if mem_bytes is None else max(1, mem_bytes // 2**20)
        if gmem is not None and not _check_share(
            r, cluster, f"{path}.gpu_memory", k["gpu_memory"], "gpu_memory"
        ):
            gmem = None
        if gmem is None:
            gpp = None
    res_ok, profile, cpu, mem = _read_resources(r, k, path, gpp, cluster)
    if profile is not None and gpp is not None:
        if "gpu_memory" in k or isinstance(gpp, float) or gpp < 1:
            r.problem(
                f"{path}.mig_profile",
                k["mig_profile"],
                "with mig_profile, gpus_per_pod is the number of MIG instances per pod: a whole number >= 1",
            )
            res_ok = False
    prio, prio_value = (
        read_priority(r, k["priority"], f"{path}.priority") if "priority" in k else ("train", None)
    )
    running_on: tuple[str, ...] | None = ()
    if "running_on" in k:
        running_on = read_running_on(r, k["running_on"], f"{path}.running_on", pods, submit, cluster)
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
    if (
        name is None
        or project is None
        or submit is None
        or pods is None
        or gpp is None
        or prio is None
        or image is None
        or selector is None
        or sm is None
        or running_on is None
        or not res_ok
    ):
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
        failure,
        None,
        line_of(node),
        gpu_memory_mib=gmem,
        mig_profile=profile,
        cpu_millis=cpu,
        memory_bytes=mem,
        priority_value=prio_value,
        running_on=running_on,
    )


def _read_generate(
    r: Reader, node: yaml.Node, path: str, projects: set[str], cluster: ClusterSpec | None
) -> GenerateSpec | None:
    k = r.mapping(node, path, GENERATE_KEYS, required=GENERATE_REQUIRED)
    if k is None:
        return None
    count = r.integer(k.get("count"), f"{path}.count", minimum=0)
    project = r.string(k.get("project"), f"{path}.project")
    if project is not None and project not in projects:
        r.problem(f"{path}.project", k["project"], f"unknown project {project!r}")
        project = None
    pods = r.integer(k.get("pods"), f"{path}.pods", minimum=1)
    sizes: list[int | float] = []
    gnode = k.get("gpus_per_pod")
    size_ok = True
    if gnode is not None:
        items = list(enumerate(gnode.value)) if isinstance(gnode, yaml.SequenceNode) else [(None, gnode)]
        if isinstance(gnode, yaml.SequenceNode) and not gnode.value:
            r.problem(f"{path}.gpus_per_pod", gnode, "expected a non-empty list of GPU counts")
        for si, snode in items:
            spath = f"{path}.gpus_per_pod" + ("" if si is None else f"[{si}]")
            v = read_gpus(r, snode, spath)
            if isinstance(v, float) and not _check_share(r, cluster, spath, snode, f"gpus_per_pod {v}"):
                v = None
            if v is None:
                size_ok = False
            else:
                sizes.append(v)
    res_ok, profile, cpu, mem = _read_resources(r, k, path, None, cluster)
    if profile is not None and any(isinstance(v, float) or v < 1 for v in sizes):
        r.problem(
            f"{path}.mig_profile",
            k["mig_profile"],
            "with mig_profile, gpus_per_pod is the number of MIG instances per pod: whole numbers >= 1",
        )
        res_ok = False
    every = r.duration(k.get("submit_every"), f"{path}.submit_every", positive=True)
    rt: tuple[int, int] | None = None
    rnode = k.get("runtime")
    if rnode is not None:
        bounds = r.sequence(rnode, f"{path}.runtime")
        if bounds is not None:
            if len(bounds) != 2:
                r.problem(f"{path}.runtime", rnode, f"expected [min, max], got a list of {len(bounds)}")
            else:
                lo = r.duration(bounds[0], f"{path}.runtime[0]", positive=True)
                hi = r.duration(bounds[1], f"{path}.runtime[1]", positive=True)
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
    if count is None or project is None or pods is None or every is None or rt is None or prefix is None:
        return None
    if not sizes or not size_ok or not res_ok:
        return None
    return GenerateSpec(
        count,
        project,
        pods,
        tuple(sizes),
        every,
        rt,
        prefix,
        line_of(node),
        mig_profile=profile,
        cpu_millis=cpu,
        memory_bytes=mem,
    )


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
                mig_profile=g.mig_profile,
                cpu_millis=g.cpu_millis,
                memory_bytes=g.memory_bytes,
            )
        )
    return out
