"""Reading ``cluster`` (nodepools, labels, taints) and ``projects``."""

from __future__ import annotations

import re

import yaml

from .model import (
    DCGM_LABEL_STYLES,
    GPU_MEMORY_MIB,
    SCHEDULERS,
    TAINT_EFFECTS,
    ClusterSpec,
    NodePoolSpec,
    ProjectSpec,
)
from .nodes import Reader, line_of


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


def read_cluster(r: Reader, node: yaml.Node | None) -> ClusterSpec | None:
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


def read_projects(r: Reader, node: yaml.Node | None) -> list[ProjectSpec]:
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
