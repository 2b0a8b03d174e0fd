"""A sweep's GPUs: DCGM's series through Prometheus, asked in the background, decoded, mapped and recorded."""

from __future__ import annotations

import hashlib
from functools import partial
from typing import TYPE_CHECKING

from collectors import mapping
from collectors.gpu_slices import record_slices
from collectors.models import Cluster, EntityVersion, GpuSlice
from collectors.sources import promql
from collectors.sources.dcgm import dcgm_identity
from collectors.sources.errors import SourceError
from collectors.sources.prometheus import Answer, PrometheusSource, Series

if TYPE_CHECKING:
    from collectors.sweep.inventory import Sweep

GpuAnswers = tuple[Answer, dict[str, Answer | None]]  # the inventory query's answer, each fact query's
GpuSeries = tuple[list[Series], dict[str, list[Series] | None]]  # the same decoded (None: no data)


def gpu_answers(sweep: Sweep) -> GpuAnswers | None:
    """The GPU inventory query and every fact query, answered but not decoded (HTTP only: runs in a
    worker thread). The watch's GPU poll compares them with the last poll's and decodes only a change.

    None when Prometheus failed (recorded once: after the first failure the others are not waited on).
    """
    at, runner = sweep.at, sweep.runner
    prom = PrometheusSource(sweep.cluster.prometheus_url)
    inventory = runner.call(
        "prometheus", f"query {promql.GPU_INVENTORY}", lambda: prom.answer(promql.GPU_INVENTORY, at)
    )
    if inventory is None:
        return None
    facts: dict[str, Answer | None] = {}
    for key, query in promql.GPU_STATE_QUERIES.items():
        answer = runner.call("prometheus", f"query {query}", partial(prom.answer, query, at))
        if answer is None:
            return None
        if answer.empty() and not inventory.empty():
            metric = promql.GPU_STATE_METRICS[key]
            why = promql.ABSENT_WHY.get(metric, "the exporter does not export it")
            runner.note(
                "prometheus",
                f"no data {metric}",
                f"no data: {metric} has no series ({why}); GPU {key} is unknown, not zero",
            )
            facts[key] = None
        else:
            facts[key] = answer
    return inventory, facts


def decode_gpu_answers(sweep: Sweep, answers: GpuAnswers | None) -> GpuSeries | None:
    """The answers' series; None (the call's row says why) when one cannot be read."""
    if answers is None:
        return None
    inventory, facts = answers
    current = promql.GPU_INVENTORY
    try:
        decoded = inventory.series()
        series: dict[str, list[Series] | None] = {}
        for key, answer in facts.items():
            current = promql.GPU_STATE_QUERIES[key]
            series[key] = answer.series() if answer is not None else None
    except SourceError as exc:
        sweep.runner.unreadable("prometheus", f"query {current}", exc)
        return None
    return decoded, series


def gpu_series(sweep: Sweep) -> tuple[GpuAnswers | None, GpuSeries | None]:
    """The answers and their series (a sweep maps them in any case: the worker thread decodes them)."""
    answers = gpu_answers(sweep)
    return answers, decode_gpu_answers(sweep, answers)


def record_gpus(sweep: Sweep, fetched: GpuSeries | None) -> None:
    """GPUs need the inventory query and every fact query; hosts resolve against the nodes just listed
    (or, if that listing failed, the nodes recorded last time)."""
    cluster, runner = sweep.cluster, sweep.runner
    if fetched is None:
        sweep.summary.skipped_kinds.append("gpu")
        return
    inventory, facts = fetched
    open_states = EntityVersion.objects.filter(cluster=cluster, valid_to__isnull=True)
    nodes = sweep.nodes
    if nodes is None:
        nodes = dict(open_states.filter(kind="node").values_list("entity__name", "state"))
    # The last states of the GPUs that stopped reporting (map_gpus keeps them, missing): only theirs are
    # read, not the fleet's (1,600 JSON states decoded at every sweep to use none).
    reporting = {dcgm_identity(s.labels)["uuid"] for s in inventory}
    open_gpus = open_states.filter(kind="gpu")
    silent = set(open_gpus.values_list("entity__name", flat=True)) - reporting
    if not silent:
        previous = {}
    elif len(silent) <= 500:  # an IN list SQLite takes; more (a fleet gone silent): all, then filtered
        previous = dict(open_gpus.filter(entity__name__in=silent).values_list("entity__name", "state"))
    else:
        rows = open_gpus.values_list("entity__name", "state")
        previous = {name: state for name, state in rows if name in silent}
    gpus = mapping.map_gpus(
        inventory,
        facts,
        nodes=nodes,
        previous=previous,
        running_pods_on_node=sweep.pods.on_node if sweep.pods else None,
        shares=sweep.pods.shares if sweep.pods else None,
    )
    runner.set_rows(f"query {promql.GPU_INVENTORY}", len(inventory))
    sweep.record("gpu", gpus, "prometheus")
    if any(g.state.get("mig") or g.state.get("shares") for g in gpus) or had_slices(cluster):
        record_slices(cluster, gpus, sweep.at)


def had_slices(cluster: Cluster) -> bool:
    """Whether the cluster has open GPU slices (shares, MIG instances) to close."""
    return GpuSlice.objects.filter(cluster=cluster, valid_to__isnull=True).exists()


def answers_digest(answers: GpuAnswers | None) -> str | None:
    """A digest of the GPU queries' answers as they came, undecoded: without their sample times (each poll
    asks at a new moment), and of the inventory query only its label sets (its value is utilisation, which
    changes at every scrape and which no GPU state keeps; ``map_gpus`` reads only its labels). In the order
    Prometheus gave them: an answer reordered only costs one mapping."""
    if answers is None:
        return None
    inventory, facts = answers
    h = hashlib.blake2b(digest_size=16)
    h.update(b"inventory\x00")
    h.update(inventory.fingerprint(values=False))
    for name, answer in sorted(facts.items()):
        h.update(f"\x00{name}\x00".encode())
        h.update(b"none" if answer is None else answer.fingerprint())
    return h.hexdigest()
