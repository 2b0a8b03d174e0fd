"""Reading the ``events``, ``alerts`` and ``expect`` sections of a scenario.

Events are checked against the world as it will be at their time: a node
named by an event must exist by then (initial pools plus earlier
``add_nodes``), a GPU index must be on that node, a job or project must be
declared. That is what keeps a scenario from silently doing nothing.
"""

from __future__ import annotations

from typing import Any

import yaml

from ..durations import compact
from .model import (
    ALERT_NAMES,
    DIAGNOSIS_CODES,
    EVENT_ACTIONS,
    AlertRuleSpec,
    ClusterSpec,
    EventSpec,
    ExpectSpec,
)
from .nodes import Reader, line_of

# Per action: (allowed keys, required keys). Durations are not used inside actions.
ACTION_KEYS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "quota": (("project", "department", "quota", "limit"), ()),
    "request": (("job", "gpus_per_pod", "pods"), ("job",)),
    "image": (("job", "image"), ("job", "image")),
    "xid": (("node", "gpu", "code"), ("node", "gpu", "code")),
    "ecc": (("node", "gpu", "dbe", "sbe"), ("node", "gpu")),
    "thermal": (("node", "gpu", "temp_c"), ("node", "gpu", "temp_c")),
    "node_ready": (("node", "ready"), ("node", "ready")),
    "cordon": (("node",), ("node",)),
    "uncordon": (("node",), ("node",)),
    "taint": (("node", "add", "remove"), ("node",)),
    "device_plugin": (("node", "healthy"), ("node", "healthy")),
    "add_nodes": (("nodepool", "count"), ("nodepool", "count")),
    "resolve": (("node",), ("node",)),
    "mig": (("node", "layout"), ("node", "layout")),
}


def _pool_names(cluster: ClusterSpec | None) -> dict[str, tuple[int, int]]:
    """nodepool -> (nodes, gpus_per_node)."""
    return {p.name: (p.nodes, p.gpus_per_node) for p in cluster.nodepools} if cluster else {}


# length: one branch per event action with its checks, in docs/scenarios.md's order
def read_events(
    r: Reader,
    node: yaml.Node | None,
    cluster: ClusterSpec | None,
    project_names: set[str],
    job_names: set[str],
    department_names: set[str] | None = None,
) -> list[EventSpec]:
    from .cluster import read_mig_layout, read_taint
    from .gpus import gpu_model
    from .loader import node_name

    raw: list[tuple[int, int, str, yaml.Node, dict[str, yaml.Node], str | None, str]] = []
    for i, enode in enumerate(r.sequence(node, "events") or []):
        path = f"events[{i}]"
        keys = r.mapping(enode, path, ("at", "actor", *EVENT_ACTIONS), required=("at",))
        if keys is None:
            continue
        at = r.duration(keys.get("at"), f"{path}.at")
        actor = r.string(keys.get("actor"), f"{path}.actor") if "actor" in keys else None
        actions = [k for k in keys if k in EVENT_ACTIONS]
        if len(actions) != 1:
            what = "no action" if not actions else f"{len(actions)} actions ({', '.join(actions)})"
            r.problem(
                path, enode, f"an event needs exactly one action among {', '.join(EVENT_ACTIONS)}; got {what}"
            )
            continue
        action = actions[0]
        allowed, required = ACTION_KEYS[action]
        args = r.mapping(keys[action], f"{path}.{action}", allowed, required=required)
        if at is None or args is None:
            continue
        raw.append((at, i, action, enode, args, actor, path))

    # Nodes that exist at each event's time: initial pools, then add_nodes in time order.
    pools = _pool_names(cluster)
    counts = {name: n for name, (n, _g) in pools.items()}
    existing = {node_name(p, k, n): p for p, n in counts.items() for k in range(1, n + 1)}
    out: list[EventSpec] = []
    # add_nodes first among events of the same instant, so "add then use" at one time works.
    for at, _i, action, enode, args, actor, path in sorted(
        raw, key=lambda e: (e[0], e[2] != "add_nodes", e[1])
    ):
        ap = f"{path}.{action}"
        val: dict[str, Any] = {}
        ok = True

        if "node" in args:
            name = r.string(args.get("node"), f"{ap}.node")
            if name is not None and cluster is not None and name not in existing:
                r.problem(f"{ap}.node", args["node"], f"unknown node {name!r} at {compact(at)}")
                name = None
            val["node"] = name
            ok &= name is not None
        if "gpu" in args:
            gpu = r.integer(args.get("gpu"), f"{ap}.gpu", minimum=0)
            if gpu is not None and val.get("node") in existing:
                per = pools[existing[val["node"]]][1]
                if gpu >= per:
                    r.problem(
                        f"{ap}.gpu", args["gpu"], f"node {val['node']} has GPUs 0..{per - 1}, got {gpu}"
                    )
                    gpu = None
            val["gpu"] = gpu
            ok &= gpu is not None
        if action == "quota":
            targets = [k for k in ("project", "department") if k in args]
            if len(targets) != 1:
                r.problem(ap, enode, "a quota event names exactly one of project or department")
                ok = False
            else:
                tk = targets[0]
                known = project_names if tk == "project" else (department_names or set())
                name = r.string(args.get(tk), f"{ap}.{tk}")
                if name is not None and name not in known:
                    r.problem(f"{ap}.{tk}", args[tk], f"unknown {tk} {name!r}")
                    name = None
                val[tk] = name
                ok &= name is not None
            if "quota" not in args and "limit" not in args:
                r.problem(ap, enode, "a quota event needs quota, limit or both")
                ok = False
            for k in ("quota", "limit"):
                if k in args:
                    if k == "limit" and r.is_null(args[k]):
                        val["limit"] = None
                        continue
                    sub = r.mapping(args[k], f"{ap}.{k}", ("gpu",), required=("gpu",))
                    g = r.integer(sub.get("gpu"), f"{ap}.{k}.gpu", minimum=0) if sub else None
                    val[k] = g
                    ok &= g is not None
        elif action in ("request", "image"):
            name = r.string(args.get("job"), f"{ap}.job")
            if name is not None and name not in job_names:
                r.problem(f"{ap}.job", args["job"], f"unknown job {name!r}")
                name = None
            val["job"] = name
            ok &= name is not None
            if action == "request":
                if "gpus_per_pod" not in args and "pods" not in args:
                    r.problem(ap, enode, "a request event needs gpus_per_pod, pods or both")
                    ok = False
                for k, lo in (("gpus_per_pod", 0), ("pods", 1)):
                    if k in args:
                        val[k] = r.integer(args[k], f"{ap}.{k}", minimum=lo)
                        ok &= val[k] is not None
            else:
                val["image"] = r.string(args.get("image"), f"{ap}.image")
                ok &= val["image"] is not None
        elif action == "xid":
            val["code"] = r.integer(args.get("code"), f"{ap}.code", minimum=1)
            ok &= val["code"] is not None
        elif action == "ecc":
            if "dbe" not in args and "sbe" not in args:
                r.problem(ap, enode, "an ecc event needs dbe, sbe or both")
                ok = False
            for k in ("dbe", "sbe"):
                if k in args:
                    val[k] = r.integer(args[k], f"{ap}.{k}", minimum=0)
                    ok &= val[k] is not None
        elif action == "thermal":
            val["temp_c"] = r.number(args.get("temp_c"), f"{ap}.temp_c", lo=0, hi=130)
            ok &= val["temp_c"] is not None
        elif action in ("node_ready", "device_plugin"):
            key = "ready" if action == "node_ready" else "healthy"
            val[key] = r.boolean(args.get(key), f"{ap}.{key}")
            ok &= val[key] is not None
        elif action == "taint":
            modes = [k for k in ("add", "remove") if k in args]
            if len(modes) != 1:
                r.problem(ap, enode, "a taint event needs exactly one of add or remove")
                ok = False
            else:
                t = read_taint(r, args[modes[0]], f"{ap}.{modes[0]}", for_removal=modes[0] == "remove")
                val[modes[0]] = t
                ok &= t is not None
        elif action == "mig":
            pool_spec = next(
                (
                    p
                    for p in (cluster.nodepools if cluster else ())
                    if p.name == existing.get(val.get("node") or "")
                ),
                None,
            )
            model = gpu_model(pool_spec.gpu_product) if pool_spec else None
            if model is not None and not model.mig_profiles:
                r.problem(
                    f"{ap}.node",
                    args["node"],
                    f"node {val['node']} has {model.product} GPUs, which do not support MIG",
                )
                ok = False
            else:
                layout = read_mig_layout(r, args.get("layout"), f"{ap}.layout", model, allow_empty=True)
                val["layout"] = layout
                ok &= layout is not None
        elif action == "add_nodes":
            pool = r.string(args.get("nodepool"), f"{ap}.nodepool")
            if pool is not None and cluster is not None and pool not in pools:
                r.problem(f"{ap}.nodepool", args["nodepool"], f"unknown nodepool {pool!r}")
                pool = None
            count = r.integer(args.get("count"), f"{ap}.count", minimum=1)
            val.update(nodepool=pool, count=count)
            ok &= pool is not None and count is not None
            if ok and pool in pools:
                assert pool is not None and count is not None
                counts[pool] += count
                # Names keep the pool's original width so existing nodes are not renamed.
                width_basis = pools[pool][0]
                for index in range(counts[pool] - count + 1, counts[pool] + 1):
                    existing[node_name(pool, index, max(width_basis, 1))] = pool
        if ok:
            out.append(EventSpec(at, action, val, actor, line_of(enode)))
    return out


def read_alerts(r: Reader, node: yaml.Node | None) -> list[AlertRuleSpec]:
    out: list[AlertRuleSpec] = []
    seen: set[str] = set()
    for i, anode in enumerate(r.sequence(node, "alerts") or []):
        path = f"alerts[{i}]"
        keys = r.mapping(anode, path, ("name", "for"), required=("name",))
        if keys is None:
            continue
        name = r.choice(keys.get("name"), f"{path}.name", ALERT_NAMES)
        for_s = r.duration(keys.get("for"), f"{path}.for") if "for" in keys else 0
        if name in seen:
            r.problem(f"{path}.name", keys.get("name"), f"duplicate alert rule {name!r}")
            continue
        if name is None or for_s is None:
            continue
        seen.add(name)
        out.append(AlertRuleSpec(name, for_s, line_of(anode)))
    return out


def _codes(r: Reader, node: yaml.Node | None, path: str) -> tuple[str, ...] | None:
    if node is None:
        return ()
    items = r.sequence(node, path)
    if items is None:
        return None
    out = []
    for i, cnode in enumerate(items):
        c = r.choice(cnode, f"{path}[{i}]", DIAGNOSIS_CODES)
        if c is None:
            return None
        out.append(c)
    return tuple(out)


def read_expect(
    r: Reader,
    node: yaml.Node | None,
    alerts: list[AlertRuleSpec],
    cluster: ClusterSpec | None,
    events: list[EventSpec],
    projects: set[str],
    jobs: set[str],
) -> list[ExpectSpec]:
    from .loader import node_name

    nodes: set[str] = set()
    if cluster:
        for p in cluster.nodepools:
            nodes.update(node_name(p.name, k, p.nodes) for k in range(1, p.nodes + 1))
    pools = _pool_names(cluster)
    added: dict[str, int] = {}
    for e in events:
        if e.action == "add_nodes":
            pool = e.args["nodepool"]
            start = pools[pool][0] + added.get(pool, 0)
            added[pool] = added.get(pool, 0) + e.args["count"]
            nodes.update(
                node_name(pool, k, max(pools[pool][0], 1))
                for k in range(start + 1, start + e.args["count"] + 1)
            )
    gpn = {n: pools[n.rsplit("-", 1)[0]][1] for n in nodes if n.rsplit("-", 1)[0] in pools}
    rules = {a.name for a in alerts}
    out: list[ExpectSpec] = []
    for i, xnode in enumerate(r.sequence(node, "expect") or []):
        path = f"expect[{i}]"
        keys = r.mapping(
            xnode,
            path,
            ("alert", "subject", "at", "top", "supported", "not_supported"),
            required=("alert", "subject"),
        )
        if keys is None:
            continue
        # `at`: an offset from start (the loader checks it is within the duration, as for events)
        at_s = r.duration(keys.get("at"), f"{path}.at") if "at" in keys else None
        bad_at = "at" in keys and at_s is None
        alert = r.choice(keys.get("alert"), f"{path}.alert", ALERT_NAMES)
        if alert is not None and alert not in rules:
            r.problem(f"{path}.alert", keys["alert"], f"alert {alert!r} is not among this scenario's alerts")
            alert = None
        subject = _subject(r, keys.get("subject"), f"{path}.subject", nodes, projects, jobs, gpn)
        top = r.choice(keys.get("top"), f"{path}.top", DIAGNOSIS_CODES) if "top" in keys else None
        sup = _codes(r, keys.get("supported"), f"{path}.supported")
        nsup = _codes(r, keys.get("not_supported"), f"{path}.not_supported")
        if alert is None or subject is None or sup is None or nsup is None or ("top" in keys and top is None):
            continue
        if bad_at:
            continue
        out.append(ExpectSpec(alert, subject, top, sup, nsup, line_of(xnode), at_s))
    return out


def _subject(
    r: Reader,
    node: yaml.Node | None,
    path: str,
    nodes: set[str],
    projects: set[str],
    jobs: set[str],
    gpus_per_node: dict[str, int],
) -> dict[str, Any] | None:
    keys = r.mapping(node, path, ("job", "node", "gpu", "project"))
    if keys is None:
        return None
    if len(keys) != 1:
        r.problem(path, node, "a subject names exactly one of job, node, gpu or project")
        return None
    kind, vnode = next(iter(keys.items()))
    if kind == "gpu":
        g = r.mapping(vnode, f"{path}.gpu", ("node", "index"), required=("node", "index"))
        if g is None:
            return None
        n = r.string(g.get("node"), f"{path}.gpu.node")
        idx = r.integer(g.get("index"), f"{path}.gpu.index", minimum=0)
        if n is not None and n not in nodes:
            r.problem(f"{path}.gpu.node", g["node"], f"unknown node {n!r}")
            return None
        if n is not None and idx is not None and idx >= gpus_per_node.get(n, idx + 1):
            r.problem(
                f"{path}.gpu.index", g["index"], f"node {n} has GPUs 0..{gpus_per_node[n] - 1}, got {idx}"
            )
            return None
        return None if n is None or idx is None else {"gpu": {"node": n, "index": idx}}
    name = r.string(vnode, f"{path}.{kind}")
    known = {"job": jobs, "node": nodes, "project": projects}[kind]
    if name is not None and name not in known:
        r.problem(f"{path}.{kind}", vnode, f"unknown {kind} {name!r}")
        return None
    return None if name is None else {kind: name}
