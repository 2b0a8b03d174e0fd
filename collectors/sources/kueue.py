"""Kueue custom objects (``kueue.x-k8s.io/v1beta1``): ClusterQueue, LocalQueue, Workload, ResourceFlavor,
read through the Kubernetes API. Read only."""

from __future__ import annotations

from typing import Any

from collectors.sources.kubernetes import KubeSource

GROUP = "kueue.x-k8s.io"
VERSION = "v1beta1"
COHORT_VERSION = "v1alpha1"  # Cohort objects (kueue.x-k8s.io/v1alpha1), where the cluster has them


class KueueSource:
    source = "kueue"

    def __init__(self, kube: KubeSource) -> None:
        self.kube = kube

    def list_cluster_queues(self) -> list[dict[str, Any]]:
        return self.kube.list_custom(GROUP, VERSION, "clusterqueues")

    def list_local_queues(self) -> list[dict[str, Any]]:
        return self.kube.list_custom(GROUP, VERSION, "localqueues")

    def list_workloads(self) -> list[dict[str, Any]]:
        return self.kube.list_custom(GROUP, VERSION, "workloads")

    def list_resource_flavors(self) -> list[dict[str, Any]]:
        return self.kube.list_custom(GROUP, VERSION, "resourceflavors")
