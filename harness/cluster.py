"""The scenario's Cluster row, pointed at the simulator's servers (and, for a new timeline, its old data
dropped)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Q

from collectors.models import Cluster
from incidents.models import Alert, Incident


def register_cluster(scenario: Any, sim: Any, *, replace: bool = False) -> tuple[Cluster, bool]:
    """The scenario's Cluster, reading the simulator ``sim``; ``replace``: its old data dropped first.

    Returns the cluster and whether there was old data (history is append-only and a new timeline may start
    before the old one ended)."""
    name = scenario.cluster.name
    where = {
        "scheduler": scenario.cluster.scheduler,
        "kubeconfig": sim.kubeconfig_path,
        "prometheus_url": sim.prometheus_url,
        "runai_url": sim.runai_url,
    }
    dropped = False
    if replace and Cluster.objects.filter(name=name).exists():
        drop_cluster(name)
        dropped = True
    cluster, _ = Cluster.objects.update_or_create(name=name, defaults=where)
    return cluster, dropped


def drop_cluster(name: str) -> None:
    """The cluster ``name`` with its incidents and their alerts.

    Left behind, the incidents would stay open forever beside the new timeline's (their cluster gone), every
    problem listed twice on the console. Those a run before this rule left without a cluster are found by
    their alerts' cluster label."""
    with transaction.atomic():
        ids = set(
            Incident.objects.filter(Q(cluster__name=name) | Q(alerts__cluster_name=name)).values_list(
                "pk", flat=True
            )
        )
        Alert.objects.filter(Q(incident__in=ids) | Q(cluster_name=name)).delete()
        Incident.objects.filter(pk__in=ids).delete()
        Cluster.objects.filter(name=name).delete()
