"""KAI Scheduler (Run:ai's open-source scheduler) custom objects: Queue (``scheduling.run.ai/v2``) and
PodGroup (``scheduling.run.ai/v2alpha2``), read through the Kubernetes API. Read only."""

from __future__ import annotations

from typing import Any

from collectors.sources.kubernetes import KubeSource

GROUP = "scheduling.run.ai"
QUEUE_VERSION = "v2"
PODGROUP_VERSION = "v2alpha2"


class KaiSource:
    source = "kai"

    def __init__(self, kube: KubeSource) -> None:
        self.kube = kube

    def list_queues(self) -> list[dict[str, Any]]:
        return self.kube.list_custom(GROUP, QUEUE_VERSION, "queues")

    def list_podgroups(self) -> list[dict[str, Any]]:
        return self.kube.list_custom(GROUP, PODGROUP_VERSION, "podgroups")
