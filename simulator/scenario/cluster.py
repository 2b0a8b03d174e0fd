"""Reading ``cluster`` (nodepools, labels, taints) and ``projects``."""

from __future__ import annotations

import math
from typing import NamedTuple

import yaml

from .gpus import CATALOG, GpuModel, gpu_model, layout_problem
from .limits import Limit, read_limit
from .model import (
    DCGM_LABEL_STYLES,
    SCHEDULERS,
    TAINT_EFFECTS,
    UNLIMITED,
    ClusterSpec,
    DepartmentSpec,
    NodePoolSpec,
    ProjectSpec,
)
from .nodes import Reader, line_of

NO_LIMIT = Limit(None, None, None)

POOL_KEYS = (
    "name",
    "nodes",
    "gpus_per_node",
    "gpu_product",
    "labels",
    "taints",
    "mig",
    "sharing",
    "cpu",
    "memory",
)


def read_mig_layout(
    r: Reader, node: yaml.Node | None, path: str, model: GpuModel | None, *, allow_empty: bool
) -> dict[str, int] | None:
    """A MIG layout ``{profile: instances per GPU}`` that fits one GPU of ``model`` (None: not checked)."""
    if node is None:
        return None
    if not isinstance(node, yaml.MappingNode) and not r.is_null(node):
        r.problem(path, node, f"expected a mapping of MIG profile to count, got {r.safe(node)!r}")
        return None
    out: dict[str, int] = {}
    ok = True
    for knode, vnode in [] if r.is_null(node) else node.value:
        name = r.safe(knode)
        if not isinstance(name, str):
            r.problem(path, knode, f"MIG profile names are strings, got {name!r}")
            ok = False
            continue
        count = r.integer(vnode, f"{path}.{name}", minimum=1)
        if name in out:
            r.problem(f"{path}.{name}", knode, f"duplicate MIG profile '{name}'")
            ok = False
        elif count is None:
            ok = False
        else:
            out[name] = count
    if not ok:
        return None
    if not out and not allow_empty:
        r.problem(path, node, "a MIG layout needs at least one profile, like {1g.10gb: 7}")
        return None
    if model is not None and out:
        why = layout_problem(model, out)
        if why:
            r.problem(path, node, f"MIG layout {_layout_text(out)} does not fit: {why}")
            return None
    return out


def _layout_text(layout: dict[str, int]) -> str:
    return "{" + ", ".join(f"{p}: {n}" for p, n in layout.items()) + "}"


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


# length: the cluster section's checks key by key, in docs/scenarios.md's order
def read_cluster(r: Reader, node: yaml.Node | None) -> ClusterSpec | None:
    keys = r.mapping(
        node,
        "cluster",
        ("name", "scheduler", "dcgm_labels", "nodepools"),
        required=("name", "scheduler", "nodepools"),
    )
    if keys is None or node is None:  # node is a mapping whenever keys is not None
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
        pk = r.mapping(pnode, path, POOL_KEYS, required=("name", "nodes", "gpus_per_node", "gpu_product"))
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
        model = gpu_model(product) if product else None
        mem = model.memory_mib if model else None
        if product and model is None:
            r.problem(
                f"{path}.gpu_product",
                pk["gpu_product"],
                f"unknown GPU product {product!r}: use a GPU feature discovery name ({', '.join(CATALOG)}) "
                f"or one containing '<n>GB'",
            )
        mig = (
            read_mig_layout(r, pk.get("mig"), f"{path}.mig", model, allow_empty=False)
            if "mig" in pk
            else None
        )
        sharing = r.boolean(pk.get("sharing"), f"{path}.sharing") if "sharing" in pk else False
        cpu = r.cpu(pk.get("cpu"), f"{path}.cpu") if "cpu" in pk else None
        memory = r.memory(pk.get("memory"), f"{path}.memory") if "memory" in pk else None
        bad = ("mig" in pk and mig is None) or sharing is None
        bad |= ("cpu" in pk and cpu is None) or ("memory" in pk and memory is None)
        if mig and sharing:
            r.problem(
                f"{path}.sharing",
                pk["sharing"],
                "a pool is either MIG-partitioned (mig) or shared (sharing: true), not both",
            )
            bad = True
        if pname in seen:
            r.problem(f"{path}.name", pk.get("name"), f"duplicate nodepool name {pname!r}")
        if pname:
            seen.add(pname)
        if pname is None or nodes is None or gpn is None or product is None or mem is None or labels is None:
            continue
        if bad:
            continue
        pools.append(
            NodePoolSpec(
                pname,
                nodes,
                gpn,
                product,
                mem,
                labels,
                tuple(taints),
                line_of(pnode),
                mig=mig,
                sharing=bool(sharing),
                cpu_millis=cpu,
                memory_bytes=memory,
            )
        )
    if not pools and keys.get("nodepools") is not None and not r.problems:
        r.problem("cluster.nodepools", keys["nodepools"], "at least one nodepool is needed")
    if scheduler == "kueue":
        for i, pool in enumerate(pools):
            if pool.sharing:
                r.problem(
                    f"cluster.nodepools[{i}].sharing",
                    None,
                    "GPU sharing (gpu-fraction / gpu-memory) is a KAI Scheduler feature; cluster.scheduler is kueue",
                    line=pool.line,
                )
    if name is None or scheduler is None or dcgm is None:
        return None
    return ClusterSpec(name, scheduler, dcgm, tuple(pools), line_of(node))


class Deserved(NamedTuple):
    gpus: int | float
    cpu_millis: int | None  # None: KAI's unlimited (-1), the default
    memory_bytes: int | None


def _deserved(r: Reader, node: yaml.Node | None, path: str) -> Deserved | None:
    """A deserved quota ``{gpu: n, cpu: c, memory: m}``: GPUs also -1 (a KAI queue's unlimited deserved quota)
    or a fraction (KAI's deserved GPUs are a number); CPU cores and memory optional, KAI's only (the loader
    says so), unlimited when absent. Kueue refuses all but whole GPUs."""
    keys = r.mapping(node, path, ("gpu", "cpu", "memory"), required=("gpu",))
    if keys is None:
        return None
    value = r.safe(keys["gpu"])
    gpus: int | float | None
    if value == -1:
        gpus = UNLIMITED
    elif isinstance(value, float):
        number = r.number(keys["gpu"], f"{path}.gpu", lo=0.0, hi=math.inf)
        gpus = None if number is None else (int(number) if number.is_integer() else number)
    else:
        gpus = r.integer(keys.get("gpu"), f"{path}.gpu", minimum=0)
    # 0 is a deserved quota too (KAI's queue that may only use what others leave free)
    cpu = (0 if r.safe(keys["cpu"]) == 0 else r.cpu(keys["cpu"], f"{path}.cpu")) if "cpu" in keys else None
    mem = (
        (0 if r.safe(keys["memory"]) == 0 else r.memory(keys["memory"], f"{path}.memory"))
        if "memory" in keys
        else None
    )
    if gpus is None or ("cpu" in keys and cpu is None) or ("memory" in keys and mem is None):
        return None
    return Deserved(gpus, cpu, mem)


def read_departments(r: Reader, node: yaml.Node | None) -> list[DepartmentSpec]:
    out: list[DepartmentSpec] = []
    seen: set[str] = set()
    for i, dnode in enumerate(r.sequence(node, "departments") or []):
        path = f"departments[{i}]"
        dk = r.mapping(
            dnode, path, ("name", "quota", "limit", "over_quota_weight"), required=("name", "quota")
        )
        if dk is None:
            continue
        name = r.string(dk.get("name"), f"{path}.name", slug=True)
        quota = _deserved(r, dk.get("quota"), f"{path}.quota")
        dlim = read_limit(r, dk.get("limit"), f"{path}.limit") if "limit" in dk else NO_LIMIT
        limit = dlim.gpus if dlim else None
        weight = (
            r.integer(dk.get("over_quota_weight"), f"{path}.over_quota_weight", minimum=0)
            if "over_quota_weight" in dk
            else 1
        )
        if quota is not None and limit is not None and limit < quota.gpus:
            r.problem(f"{path}.limit", dk["limit"], f"limit ({limit}) is below quota ({quota.gpus})")
            continue
        if name in seen:
            r.problem(f"{path}.name", dk.get("name"), f"duplicate department name {name!r}")
        if name:
            seen.add(name)
        if name is None or quota is None or weight is None or dlim is None:
            continue
        out.append(
            DepartmentSpec(
                name,
                quota.gpus,
                limit,
                line_of(dnode),
                weight,
                dlim.cpu_millis,
                dlim.memory_bytes,
                quota_cpu_millis=quota.cpu_millis,
                quota_memory_bytes=quota.memory_bytes,
            )
        )
    return out


def read_projects(
    r: Reader, node: yaml.Node | None, departments: set[str] | None = None
) -> list[ProjectSpec]:
    out: list[ProjectSpec] = []
    seen: set[str] = set()
    for i, pnode in enumerate(r.sequence(node, "projects") or []):
        path = f"projects[{i}]"
        pk = r.mapping(
            pnode,
            path,
            ("name", "namespace", "quota", "limit", "over_quota_weight", "priority", "department"),
            required=("name", "quota"),
        )
        if pk is None:
            continue
        name = r.string(pk.get("name"), f"{path}.name", slug=True)
        namespace = (
            r.string(pk.get("namespace"), f"{path}.namespace", slug=True) if "namespace" in pk else name
        )
        quota = _deserved(r, pk.get("quota"), f"{path}.quota")
        plim = read_limit(r, pk.get("limit"), f"{path}.limit") if "limit" in pk else NO_LIMIT
        limit = plim.gpus if plim else None
        weight = (
            r.integer(pk.get("over_quota_weight"), f"{path}.over_quota_weight", minimum=0)
            if "over_quota_weight" in pk
            else 1
        )
        prio = r.integer(pk.get("priority"), f"{path}.priority") if "priority" in pk else 0
        dept = r.string(pk.get("department"), f"{path}.department") if "department" in pk else None
        if dept is not None and dept not in (departments or set()):
            known = ", ".join(sorted(departments or ())) or "none declared"
            r.problem(
                f"{path}.department", pk["department"], f"unknown department {dept!r} (departments: {known})"
            )
            continue
        if "department" in pk and dept is None:
            continue
        if quota is not None and limit is not None and limit < quota.gpus:
            r.problem(f"{path}.limit", pk["limit"], f"limit ({limit}) is below quota ({quota.gpus})")
        if name in seen:
            r.problem(f"{path}.name", pk.get("name"), f"duplicate project name {name!r}")
        if name:
            seen.add(name)
        if (
            name is None
            or namespace is None
            or quota is None
            or weight is None
            or prio is None
            or plim is None
        ):
            continue
        out.append(
            ProjectSpec(
                name,
                namespace,
                quota.gpus,
                limit,
                weight,
                prio,
                line_of(pnode),
                dept,
                limit_cpu_millis=plim.cpu_millis,
                limit_memory_bytes=plim.memory_bytes,
                quota_cpu_millis=quota.cpu_millis,
                quota_memory_bytes=quota.memory_bytes,
            )
        )
    return out
