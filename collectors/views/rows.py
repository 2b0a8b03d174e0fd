"""The typed rows the entity pages hand their templates: a version (or slice) and what the view worked out for it.

Views once attached these values to model instances (``g.pod_link = …``), which no type checker can follow
(issue 19). Each row keeps its model object and exposes, as read-only properties, the few of its fields the
page's template reads, under the same names: the templates and the rendered HTML are unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from collectors.models import Entity, EntityVersion, GpuSlice
from collectors.queries import Ref
from collectors.xid import XidSeen


@dataclass
class VersionRow:
    """A version in a table: its entity, state, phase and GPUs as the template reads them."""

    version: EntityVersion

    @property
    def entity(self) -> Entity:
        return self.version.entity

    @property
    def state(self) -> dict[str, Any]:
        return self.version.state

    @property
    def phase(self) -> str:
        return self.version.phase

    @property
    def gpus(self) -> int | None:
        return self.version.gpus

    @property
    def node(self) -> str:
        return self.version.node


@dataclass
class NodeGpuRow(VersionRow):
    """A GPU on the node page: its link, its last Xid up to t, the pod holding it and that pod's link."""

    link: str = ""
    xid: XidSeen | None = None
    pod_ref: Entity | Ref | None = None
    pod_link: str = ""


@dataclass
class PodRow(VersionRow):
    """A pod on the node or job page: kubectl's STATUS at t and the links to its job and node."""

    status: str = ""
    link: str = ""
    job_ref: Ref | None = None
    job_link: str = ""
    node_ref: Ref | None = None


@dataclass
class GpuUserRow:
    """A version of a GPU that names a pod, on the GPU page: who used it around t, from when to when."""

    version: EntityVersion
    pod_ref: Ref | None

    @property
    def valid_from(self) -> datetime:
        return self.version.valid_from

    @property
    def valid_to(self) -> datetime | None:
        return self.version.valid_to


@dataclass
class SliceRow:
    """A share or MIG instance of a GPU at t, on the GPU page, with the pods it names."""

    slice: GpuSlice
    pod_ref: Ref | None
    reservation_ref: Ref | None

    @property
    def kind(self) -> str:
        return self.slice.kind

    @property
    def fraction(self) -> float | None:
        return self.slice.fraction

    @property
    def gi_id(self) -> int | None:
        return self.slice.gi_id

    @property
    def profile(self) -> str:
        return self.slice.profile

    @property
    def memory_mib(self) -> int | None:
        return self.slice.memory_mib

    @property
    def valid_from(self) -> datetime:
        return self.slice.valid_from

    def get_kind_display(self) -> str:
        return self.slice.get_kind_display()


@dataclass
class JobRow(VersionRow):
    """A job in a list (the job list, a project's or queue's jobs): its place in the list or queue, its queue
    and project, and what is wrong with its pods ({reason: pods})."""

    position: int | None = None
    queue_ref: Ref | None = None
    project_ref: Ref | None = None
    trouble: dict[str, int] = field(default_factory=dict)

    @property
    def queue(self) -> str:
        return self.version.queue

    @property
    def gpu_units(self) -> float | None:
        return self.version.gpu_units
