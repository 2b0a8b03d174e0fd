"""A queue's ``limit``: GPUs, and under KAI its CPU and memory (a KAI Queue's ``limit`` of each resource)."""

from __future__ import annotations

from typing import NamedTuple

import yaml

from .model import UNLIMITED, DepartmentSpec, ProjectSpec
from .nodes import Reader


class Limit(NamedTuple):
    gpus: int | None
    cpu_millis: int | None
    memory_bytes: int | None


def read_limit(r: Reader, node: yaml.Node | None, path: str) -> Limit | None:
    """``{gpu: 24, cpu: 64, memory: 512Gi}``, at least one of them; None when it has a problem."""
    keys = r.mapping(node, path, ("gpu", "cpu", "memory"))
    if keys is None:
        return None
    if not keys:
        r.problem(path, node, "a limit needs at least one of gpu, cpu or memory")
        return None
    gpus = r.integer(keys["gpu"], f"{path}.gpu", minimum=0) if "gpu" in keys else None
    cpu = r.cpu(keys["cpu"], f"{path}.cpu") if "cpu" in keys else None
    mem = r.memory(keys["memory"], f"{path}.memory") if "memory" in keys else None
    if any(k in keys and v is None for k, v in (("gpu", gpus), ("cpu", cpu), ("memory", mem))):
        return None
    return Limit(gpus, cpu, mem)


def kai_only_queues(r: Reader, departments: list[DepartmentSpec], projects: list[ProjectSpec]) -> None:
    """What only a KAI Queue can say: an unlimited (-1) or fractional deserved quota, CPU and memory quotas and
    limits."""
    queues: list[tuple[str, int, DepartmentSpec | ProjectSpec]] = [
        ("departments", i, d) for i, d in enumerate(departments)
    ]
    queues += [("projects", i, p) for i, p in enumerate(projects)]
    for section, i, q in queues:
        if q.quota_gpus == UNLIMITED or not float(q.quota_gpus).is_integer():
            r.problem(
                f"{section}[{i}].quota.gpu",
                None,
                f"{q.quota_gpus} (an unlimited or fractional deserved quota) is KAI's; a Kueue nominal "
                "quota needs a whole number >= 0",
                line=q.line,
            )
        if q.limit_cpu_millis is not None or q.limit_memory_bytes is not None:
            r.problem(
                f"{section}[{i}].limit",
                None,
                "cpu and memory limits are a KAI Queue's; Kueue's quotas here are GPUs only",
                line=q.line,
            )
        if q.quota_cpu_millis is not None or q.quota_memory_bytes is not None:
            r.problem(
                f"{section}[{i}].quota",
                None,
                "cpu and memory deserved quotas are a KAI Queue's; Kueue's quotas here are GPUs only",
                line=q.line,
            )
