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
from incidents.xid_seen import XidSeen
from rcaweb.row_attribute import Via
from web.inventory.sharing import GpuUse, PodGpu


@dataclass
class VersionRow:
    """A version in a table: its entity, state, phase and GPUs as the template reads them."""

    version: EntityVersion

    entity = Via[Entity]("version")
    state = Via[dict[str, Any]]("version")
    phase = Via[str]("version")
    gpus = Via[int | None]("version")
    node = Via[str]("version")


@dataclass
class NodeGpuRow(VersionRow):
    """A GPU on the node page: its link, its last Xid up to t, the pod holding it and that pod's link."""

    link: str = ""
    xid: XidSeen | None = None
    pod_ref: Entity | Ref | None = None
    pod_link: str = ""
    use: GpuUse | None = (
        None  # who holds it: the pods sharing it or on its MIG instances, KAI's reservation pod
    )


@dataclass
class PodRow(VersionRow):
    """A pod on the node or job page: kubectl's STATUS at t and the links to its job and node."""

    status: str = ""
    link: str = ""
    job_ref: Ref | None = None
    job_link: str = ""
    node_ref: Ref | None = None
    gpu_words: str = (
        ""  # what it asks when a share or MIG instances ("0.5 of an L40S, 22.5 GiB"); "" when whole
    )
    reservation: bool = False  # KAI's reservation pod (holds a shared GPU's device for the pods sharing it)
    held: list[PodGpu] = field(default_factory=list)  # its shares and MIG instances at t, with their GPU


@dataclass
class GpuUserRow:
    """A version of a GPU that names a pod, on the GPU page: who used it around t, from when to when."""

    version: EntityVersion
    pod_ref: Ref | None
    reservation: bool = False  # KAI's reservation pod: it held the device for the pods sharing the GPU
    spanned: bool = False  # several consecutive versions naming the same pod, shown as one row
    span_end: datetime | None = None  # their last one's end (None: still)

    valid_from = Via[datetime]("version")

    @property
    def valid_to(self) -> datetime | None:
        return self.span_end if self.spanned else self.version.valid_to


@dataclass
class SliceRow:
    """A share or MIG instance of a GPU at t, on the GPU page, with the pods it names."""

    slice: GpuSlice
    pod_ref: Ref | None
    reservation_ref: Ref | None

    kind = Via[str]("slice")
    fraction = Via[float | None]("slice")
    gi_id = Via[int | None]("slice")
    profile = Via[str]("slice")
    memory_mib = Via[int | None]("slice")
    valid_from = Via[datetime]("slice")

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

    queue = Via[str]("version")
    gpu_units = Via[float | None]("version")
