"""Two job keys that let a scenario start from a scheduler's own test fixture: a numeric ``priority`` and
``running_on``, the nodes a job is already running on at the start (one per pod)."""

from __future__ import annotations

import yaml

from .model import JOB_PRIORITIES, NON_PREEMPTIBLE_PRIORITY, ClusterSpec
from .nodes import Reader


def read_priority(r: Reader, node: yaml.Node, path: str) -> tuple[str | None, int | None]:
    """``train`` | ``inference`` | a KAI priority value (an integer >= 0; from 100 on not preemptible).

    Returns the name the rest of the simulator reads (train: preemptible, inference: not) and the number."""
    value = r.safe(node)
    if isinstance(value, int) and not isinstance(value, bool):
        number = r.integer(node, path, minimum=0)
        if number is None:
            return None, None
        return ("inference" if number >= NON_PREEMPTIBLE_PRIORITY else "train"), number
    if not isinstance(value, str):
        r.problem(
            path, node, f"expected train, inference or a priority value (an integer >= 0), got {value!r}"
        )
        return None, None
    return r.choice(node, path, JOB_PRIORITIES), None


def read_running_on(
    r: Reader, node: yaml.Node, path: str, pods: int | None, submit: int | None, cluster: ClusterSpec | None
) -> tuple[str, ...] | None:
    """One node per pod, each of the cluster's initial nodes; only for a job submitted at ``0s``."""
    from .loader import node_name

    items = r.sequence(node, path)
    if items is None:
        return None
    names = [r.string(item, f"{path}[{i}]") for i, item in enumerate(items)]
    known = {
        node_name(p.name, i, p.nodes)
        for p in (cluster.nodepools if cluster else ())
        for i in range(1, p.nodes + 1)
    }
    ok = True
    for i, (item, name) in enumerate(zip(items, names, strict=True)):
        if name is not None and name not in known:
            r.problem(f"{path}[{i}]", item, f"unknown node {name!r}")
            ok = False
    if pods is not None and len(items) != pods:
        r.problem(path, node, f"expected one node per pod ({pods}), got {len(items)}")
        ok = False
    if submit is not None and submit != 0:
        r.problem(path, node, "only a job submitted at 0s can be running at the start")
        ok = False
    if not ok or None in names:
        return None
    return tuple(n for n in names if n is not None)
