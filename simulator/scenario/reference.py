"""Reading a scenario's ``reference`` section: the end state an outside reference expects.

A case transcribed from another scheduler's own test tables (KAI Scheduler's, Kueue's) is a scenario plus
what that scheduler's test expects at the end: which jobs run, and on which node. The simulator does not
read it; tests run the scenario and compare (tests/simulator/test_kai_cases.py), and so can anything
else that loads the file. Job and node names must exist, so a typo cannot make a case pass vacuously.
"""

from __future__ import annotations

import yaml

from .model import ClusterSpec, ReferenceSpec
from .nodes import Reader

REFERENCE_KEYS = ("source", "family", "what", "notes", "end_state")
END_STATES = ("running", "pending")


def read_reference(
    r: Reader, node: yaml.Node, cluster: ClusterSpec | None, job_names: set[str]
) -> ReferenceSpec | None:
    from .loader import node_name

    k = r.mapping(node, "reference", REFERENCE_KEYS, required=("source", "end_state"))
    if k is None:
        return None
    text = {key: r.string(k.get(key), f"reference.{key}") if key in k else "" for key in REFERENCE_KEYS[:4]}
    nodes = {
        node_name(p.name, i, p.nodes)
        for p in (cluster.nodepools if cluster else ())
        for i in range(1, p.nodes + 1)
    }
    end: dict[str, tuple[str, str | None]] = {}
    state_node = k.get("end_state")
    entries = r.mapping(state_node, "reference.end_state", tuple(sorted(job_names))) if state_node else None
    for job, vnode in (entries or {}).items():
        path = f"reference.end_state.{job}"
        v = r.mapping(vnode, path, ("state", "node"), required=("state",))
        if v is None:
            continue
        state = r.choice(v.get("state"), f"{path}.state", END_STATES)
        where = None
        if "node" in v and not r.is_null(v["node"]):
            where = r.string(v["node"], f"{path}.node")
            if where is not None and where not in nodes:
                r.problem(
                    f"{path}.node", v["node"], f"unknown node {where!r} (nodes: {', '.join(sorted(nodes))})"
                )
                continue
            if state == "pending":
                r.problem(f"{path}.node", v["node"], "a pending job has no node")
                continue
        if state is not None:
            end[job] = (state, where)
    if any(v is None for v in text.values()):
        return None
    return ReferenceSpec(
        source=text["source"] or "",
        family=text["family"] or "",
        what=text["what"] or "",
        notes=text["notes"] or "",
        end_state=end,
    )
