"""The why-pending panel's GPU tables: per node, what is left of each shared GPU against the share a job asks
(``share_panel``), and the MIG instances of the profiles it asks with the nodes a repartition could give them
(``mig_panel``); each with the sentence the panel's verdict says of it. Read from the fit rows, the same the
checks read."""

from __future__ import annotations

from typing import Any

from incidents.diagnosis import fit as F
from incidents.diagnosis.mig_profiles import repartition_candidates
from incidents.diagnosis.request import Request
from incidents.diagnosis.shares import share_words
from incidents.diagnosis.types import DiagnosisInput

BLOCKER_WORDS = {
    F.NOT_READY: "NotReady",
    F.CORDONED: "cordoned",
    F.TAINT: "untolerated taint",
    F.SELECTOR: "selector mismatch",
    F.DEVICE_PLUGIN: "device plugin unhealthy",
    F.MISSING_GPU: "GPU missing",
    F.INSUFFICIENT: "not enough free GPUs",
}


def share_panel(req: Request, rows: list[F.NodeFit]) -> dict[str, Any]:
    """Per node the job may use, each shared GPU's free fraction and memory against the share asked (the fit's
    own rows: ``NodeFit.shared`` and ``share_fits``, as the gpu_fragmentation check reads them)."""
    by_memory = not req.share
    nodes: list[dict[str, Any]] = []
    blocked = 0
    for r in rows:
        if any(b in F.STATIC_BLOCKERS for b in r.blockers):
            blocked += 1
            continue
        gpus = []
        for x in r.shared:
            takes = F.share_fits(req, x["free"], x["free_mib"], None)
            gpus.append({**x, "takes": takes, "holders_words": _holders(x["holders"])})
        if not gpus and not r.free and not r.nominal:
            continue
        nodes.append(
            {
                "node": r.node,
                "pool": r.pool,
                "gpus": gpus,
                "whole_free": r.free,
                "per_whole": r.shares_per_gpu,
                "slots": r.share_slots,
                "pods_fit": r.pods_fit,
                "held_whole": max(r.allocated - len(r.shared), 0),
                "other": [BLOCKER_WORDS.get(b, b) for b in r.blockers if b != F.INSUFFICIENT],
            }
        )
    nodes.sort(key=lambda n: (-n["slots"], n["node"]))
    return {
        "asked": share_words(req),
        "by_memory": by_memory,
        "pods": req.pods,
        "nodes": nodes,
        "blocked_nodes": blocked,
        "largest": max(
            [((x["free_mib"] or 0) if by_memory else x["free"]) for n in nodes for x in n["gpus"]]
            + ([1.0] if any(n["whole_free"] for n in nodes) and not by_memory else []),
            default=0,
        ),
    }


def _holders(holders: list[dict[str, Any]]) -> str:
    return ", ".join(
        f"{h['pod']} ({h['fraction']:g})" if h.get("fraction") is not None else str(h.get("pod"))
        for h in holders
    )


def mig_panel(di: DiagnosisInput, req: Request, rows: list[F.NodeFit]) -> dict[str, Any]:
    """Per node, the instances of each profile the job asks that it advertises and that are free, its layout,
    and the nodes a repartition could give the profile with the pods it would evict (as mig_profile_unavailable)."""
    usable = [r for r in rows if not any(b in F.STATIC_BLOCKERS for b in r.blockers)]
    nodes = []
    for r in rows:
        if not r.mig_layout and not r.mig_config:
            continue
        nodes.append(
            {
                "node": r.node,
                "pool": r.pool,
                "config": r.mig_config,
                "layout": ", ".join(f"{n} × {p}" for p, n in sorted(r.mig_layout.items()) if n)
                or "no instances",
                "profiles": [
                    {
                        "profile": p,
                        "per_pod": n,
                        "advertised": r.mig_layout.get(p, 0),
                        "used": r.mig_used.get(p, 0),
                        "free": r.mig_free(p),
                    }
                    for p, n in sorted(req.mig.items())
                ],
                "pods_fit": r.pods_fit,
                "usable": r in usable,
                "other": [BLOCKER_WORDS.get(b, b) for b in r.blockers if b != F.INSUFFICIENT_MIG],
            }
        )
    advertised = {p: sum(r.mig_layout.get(p, 0) for r in usable) for p in req.mig}
    free = {p: sum(r.mig_free(p) for r in usable) for p in req.mig}
    candidates = [
        {**c, "evicts_words": ", ".join(e.label for e in c["evicts"][:6])}
        for c in repartition_candidates(di, usable)
    ]
    return {
        "asked": " + ".join(f"{n} × {p}" for p, n in sorted(req.mig.items())),
        "pods": req.pods,
        "nodes": nodes,
        "advertised": advertised,
        "free": free,
        "missing": [p for p, n in advertised.items() if n == 0],
        "candidates": candidates,
    }


def share_verdict(sh: dict[str, Any]) -> str:
    unit = "MiB of GPU memory" if sh["by_memory"] else "of a GPU"
    gpus = [x for n in sh["nodes"] for x in n["gpus"]]
    whole = sum(n["whole_free"] for n in sh["nodes"])
    if sh["by_memory"]:
        total = sum(x["free_mib"] or 0 for x in gpus)
    else:
        total = round(sum(x["free"] for x in gpus) + whole, 4)
    room = sum(n["slots"] for n in sh["nodes"])
    if room == 0 and gpus:
        return (
            f"No GPU has {sh['asked']} free: {len(gpus)} shared GPU(s) on usable nodes leave {total:g} {unit} in "
            f"total (the most on one GPU: {sh['largest']:g}), and {whole} whole GPU(s) are free."
        )
    if room == 0:
        return f"No usable node has a shared GPU or a free GPU for a share of {sh['asked']}."
    return (
        f"Room for {room} share(s) of {sh['asked']} on usable nodes, {sh['pods']} needed; other requirements "
        "(CPU, memory, the gang) decide the rest."
    )


def mig_verdict(mg: dict[str, Any]) -> str:
    if mg["missing"]:
        where = (
            "; could be repartitioned: "
            + ", ".join(f"{c['node']} (evicts {len(c['evicts'])} pod(s))" for c in mg["candidates"][:3])
            if mg["candidates"]
            else "; no usable node is MIG-capable"
        )
        return f"No usable node advertises {', '.join(mg['missing'])}{where}."
    used = ", ".join(f"{p}: {mg['free'][p]} free of {mg['advertised'][p]}" for p in mg["advertised"])
    return f"MIG instances of {mg['asked']} per pod: {used} on usable nodes, for {mg['pods']} pod(s)."
