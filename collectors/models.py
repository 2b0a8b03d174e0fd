"""Inventory with history: what each object looked like at any moment.

An :class:`Entity` is one real object (project, queue, job, pod, node, gpu);
its :class:`EntityVersion` rows cover [valid_from, valid_to) with the state as
JSON plus typed hot columns for the queries pages run. A sweep that sees no
change writes nothing; a change closes the open version, opens a new one and
records one :class:`Change` per changed field (see ``collectors.inventory``).
"""

from __future__ import annotations

from datetime import datetime

from django.db import models

from rcaweb import kinds

KIND_CHOICES = kinds.choices()  # the registry of kinds (rcaweb/kinds.py)
NAMESPACED_KINDS = kinds.namespaced()


class Cluster(models.Model):
    """A Kubernetes cluster rcaweb watches, and where its sources answer."""

    SCHEDULERS = [("kai", "KAI Scheduler / Run:ai"), ("kueue", "Kueue"), ("default", "kube-scheduler")]

    name = models.SlugField(max_length=63, unique=True)
    scheduler = models.CharField(max_length=16, choices=SCHEDULERS, default="kai")
    kubeconfig = models.CharField(
        max_length=500, blank=True, help_text="path; blank = in-cluster service account"
    )
    prometheus_url = models.URLField(blank=True)
    runai_url = models.URLField(blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Entity(models.Model):
    """One real object, whatever its history. ``namespace`` is '' for cluster-scoped kinds; a GPU's name is its UUID."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="entities")
    kind = models.CharField(max_length=16, choices=KIND_CHOICES)
    namespace = models.CharField(max_length=253, blank=True, default="")
    name = models.CharField(max_length=253)
    uid = models.CharField(max_length=64, blank=True, default="")
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cluster", "kind", "namespace", "name"], name="entity_identity"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace + '/' if self.namespace else ''}{self.name}"

    def get_absolute_url(self) -> str:
        """The one URL builder for entity pages (docs/conventions.md §3). Callers add the cursor."""
        return kinds.url_for(self.kind, self.cluster.name, self.namespace, self.name)

    def as_of(self, t: datetime) -> EntityVersion | None:
        return EntityVersion.objects.as_of(t).filter(entity=self).first()


class EntityVersionQuerySet(models.QuerySet):
    def as_of(self, t: datetime) -> EntityVersionQuerySet:
        """Versions valid at ``t``: valid_from <= t < valid_to (open versions have valid_to NULL)."""
        return self.filter(valid_from__lte=t).filter(
            models.Q(valid_to__isnull=True) | models.Q(valid_to__gt=t)
        )

    def overlapping(self, start: datetime, end: datetime) -> EntityVersionQuerySet:
        return self.filter(valid_from__lt=end).filter(
            models.Q(valid_to__isnull=True) | models.Q(valid_to__gt=start)
        )


class EntityVersion(models.Model):
    """An entity's state over [valid_from, valid_to). ``kind``/``cluster`` are copied for index-only lookups."""

    entity = models.ForeignKey(Entity, on_delete=models.CASCADE, related_name="versions")
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=16, choices=KIND_CHOICES)
    valid_from = models.DateTimeField()
    valid_to = models.DateTimeField(null=True, blank=True)
    deleted = models.BooleanField(default=False, help_text="a tombstone: the object was gone from valid_from")
    state = models.JSONField(default=dict)
    state_hash = models.CharField(
        max_length=32, blank=True, default=""
    )  # inventory.state_hash: unchanged = no decode
    # Hot columns (typed, indexed where pages filter on them).
    phase = models.CharField(
        max_length=32, blank=True, default=""
    )  # pod/job phase, node Ready/NotReady, gpu state
    node = models.CharField(max_length=253, blank=True, default="")  # pod/gpu -> node name
    namespace = models.CharField(max_length=253, blank=True, default="")
    queue = models.CharField(max_length=253, blank=True, default="")  # job/pod -> queue
    project = models.CharField(max_length=253, blank=True, default="")  # job/pod/queue -> project
    job = models.CharField(max_length=253, blank=True, default="")  # pod -> job name
    pod = models.CharField(max_length=253, blank=True, default="")  # gpu -> "ns/pod" using it
    gpus = models.IntegerField(
        null=True, blank=True
    )  # requested (pod: per pod, job: total) or capacity (node)
    gpus_allocatable = models.IntegerField(null=True, blank=True)  # node
    # pod/job: GPUs it counts in its queue, fractions included (a 0.5 share, a MIG 3g.40gb = 3 under KAI);
    # queue/project/department: GPUs allocated to it. ``gpus`` stays the whole-device count.
    gpu_units = models.FloatField(null=True, blank=True)
    ready = models.BooleanField(null=True, blank=True)

    objects = EntityVersionQuerySet.as_manager()

    class Meta:
        indexes = [
            # Entity.as_of / history of one entity: WHERE entity_id=? AND valid_from<=t ORDER BY valid_from
            models.Index(fields=["entity", "valid_from"], name="ev_entity_from"),
            # "all nodes/jobs of a cluster at t": WHERE cluster_id=? AND kind=? AND valid_from<=t AND valid_to>t
            models.Index(fields=["cluster", "kind", "valid_to", "valid_from"], name="ev_cluster_kind"),
            # "pods on node X at t", "gpus of node X at t", "jobs of queue/project at t", "pods of job at t".
            # valid_to before valid_from: an as-of read asks for the open versions (valid_to IS NULL) and the
            # closed ones that end after t (valid_to > t), and valid_from <= t is checked in the index, so only
            # the versions valid at t are read from the table (queries._VERSIONS_AT).
            models.Index(fields=["cluster", "kind", "node", "valid_to", "valid_from"], name="ev_node_at"),
            models.Index(fields=["cluster", "kind", "queue", "valid_to", "valid_from"], name="ev_queue_at"),
            models.Index(
                fields=["cluster", "kind", "project", "valid_to", "valid_from"], name="ev_project_at"
            ),
            models.Index(fields=["cluster", "kind", "job", "valid_to", "valid_from"], name="ev_job_at"),
        ]
        constraints = [
            # Never two open versions of one entity (a sweep must close before it opens).
            models.UniqueConstraint(
                fields=["entity"], condition=models.Q(valid_to__isnull=True), name="one_open_version"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.entity_id} [{self.valid_from:%Y-%m-%d %H:%M:%S}, {self.valid_to or '…'})"


class GpuSlice(models.Model):
    """One share or one MIG instance of a GPU over [valid_from, valid_to), and the pod on it.

    A shared GPU (KAI GPU sharing) has one slice per pod sharing it, with the fraction of the GPU and the GPU
    memory it was given; the device itself is held by KAI's reservation pod (``reservation``). A MIG GPU has
    one slice per GPU instance (``gi_id``, ``profile``), with its pod or none. Written by the inventory sweep
    by diff (``collectors.gpu_slices.record_slices``): an unchanged slice writes nothing.
    """

    KINDS = [("share", "GPU share"), ("mig", "MIG instance")]

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    gpu = models.ForeignKey(Entity, on_delete=models.CASCADE, related_name="slices")
    kind = models.CharField(max_length=8, choices=KINDS)
    node = models.CharField(max_length=253, blank=True, default="")
    gi_id = models.IntegerField(null=True, blank=True)  # MIG: GPU instance id (DCGM GPU_I_ID)
    profile = models.CharField(max_length=32, blank=True, default="")  # MIG: "3g.40gb"
    pod = models.CharField(max_length=507, blank=True, default="")  # "ns/name", "" for a free MIG instance
    fraction = models.FloatField(
        null=True, blank=True
    )  # share: part of the GPU (gpu-fraction, or memory share)
    memory_mib = models.IntegerField(null=True, blank=True)  # share: GPU memory given; MIG: instance memory
    reservation = models.CharField(max_length=507, blank=True, default="")  # share: KAI's reservation pod
    valid_from = models.DateTimeField()
    valid_to = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            # a GPU's slices at t: WHERE gpu_id=? AND valid_from<=t AND (valid_to IS NULL OR valid_to>t)
            models.Index(fields=["gpu", "valid_to", "valid_from"], name="slice_gpu_at"),
            # which slice a pod holds at t (pod page, why-pending per node)
            models.Index(fields=["cluster", "pod", "valid_to"], name="slice_pod_at"),
        ]

    def __str__(self) -> str:
        what = f"MIG {self.profile} #{self.gi_id}" if self.kind == "mig" else f"share {self.fraction or 0:g}"
        return f"{self.gpu_id} {what}: {self.pod or 'free'}"


class Change(models.Model):
    """One field of one entity changed at ``time`` (from a sweep diff, a scheduler API, or an external webhook)."""

    SOURCES = [
        ("k8s", "Kubernetes"),
        ("kai", "KAI Scheduler"),
        ("kueue", "Kueue"),
        ("runai", "Run:ai"),
        ("prometheus", "Prometheus"),
        ("external", "external"),
    ]

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="changes")
    entity = models.ForeignKey(
        Entity, on_delete=models.CASCADE, related_name="changes", null=True, blank=True
    )
    kind = models.CharField(max_length=16, blank=True, default="")  # copy of entity.kind, for filters
    time = models.DateTimeField()
    field = models.CharField(max_length=200)  # dotted path: "spec.quota.gpu", "created", "deleted"
    old = models.JSONField(null=True, blank=True)
    new = models.JSONField(null=True, blank=True)
    source = models.CharField(max_length=16, choices=SOURCES, default="k8s")
    actor = models.CharField(max_length=200, blank=True, default="")
    summary = models.CharField(max_length=500, blank=True, default="")  # external changes: what happened
    link = models.URLField(blank=True, default="")  # external changes: CI/CD run, ticket

    class Meta:
        indexes = [
            models.Index(
                fields=["entity", "time"], name="change_entity_time"
            ),  # entity page "changes around t"
            models.Index(fields=["cluster", "time"], name="change_cluster_time"),  # /changes/ window listing
        ]
        ordering = ["time", "id"]

    def __str__(self) -> str:
        return f"{self.time:%Y-%m-%d %H:%M:%S} {self.entity or ''} {self.field}: {self.old!r} -> {self.new!r}"


class KubeEvent(models.Model):
    """A Kubernetes Event kept past its 1 h TTL, deduplicated on (uid, count)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="events")
    uid = models.CharField(max_length=64)
    count = models.IntegerField(default=1)
    namespace = models.CharField(max_length=253, blank=True, default="")
    involved_kind = models.CharField(max_length=64)
    involved_name = models.CharField(max_length=253)
    involved_namespace = models.CharField(max_length=253, blank=True, default="")
    reason = models.CharField(max_length=128)
    message = models.TextField(blank=True, default="")
    type = models.CharField(max_length=16, default="Normal")
    component = models.CharField(max_length=128, blank=True, default="")
    first_time = models.DateTimeField()
    last_time = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cluster", "uid", "count"], name="event_uid_count")]
        indexes = [
            # events of one object near t: WHERE involved_kind=? AND involved_namespace=? AND involved_name=? AND last_time BETWEEN
            models.Index(
                fields=["cluster", "involved_kind", "involved_namespace", "involved_name", "last_time"],
                name="event_object",
            ),
            models.Index(fields=["cluster", "last_time"], name="event_time"),
            # an incident's events: WHERE involved_name IN (its objects) AND last_time >= start, whatever the kind
            models.Index(fields=["cluster", "involved_name", "last_time"], name="event_name"),
        ]

    def __str__(self) -> str:
        return f"{self.last_time:%H:%M:%S} {self.involved_kind}/{self.involved_name} {self.reason}"


class TelemetrySample(models.Model):
    """A downsampled GPU metric point (DCGM through Prometheus) for fleet and entity charts."""

    # A sweep writes ~10^4 points per metric. Their foreign keys have no index of their own (sample_cluster_metric
    # and sample_identity start with them and serve their lookups and cascades) and no database constraint:
    # PostgreSQL checks a deferred constraint per row at commit, a third of a sweep's write. The references
    # are kept by this app: the one writer takes GPU ids from the cluster's entities as it stores, and a
    # cluster or GPU deleted takes its points with it through Django's cascade (tests/collectors/test_bulk.py).
    cluster = models.ForeignKey(
        Cluster, on_delete=models.CASCADE, related_name="+", db_index=False, db_constraint=False
    )
    gpu = models.ForeignKey(
        Entity, on_delete=models.CASCADE, related_name="samples", db_index=False, db_constraint=False
    )
    metric = models.CharField(max_length=64)  # DCGM field name, e.g. DCGM_FI_PROF_SM_ACTIVE
    time = models.DateTimeField()
    value = models.FloatField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["gpu", "metric", "time"], name="sample_identity")]
        indexes = [
            models.Index(fields=["cluster", "metric", "time"], name="sample_cluster_metric")
        ]  # fleet charts

    def __str__(self) -> str:
        return f"{self.metric} {self.time:%H:%M} {self.value}"


class SourceRun(models.Model):
    """One call of one source during a sweep: success, or the error that is itself evidence."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="source_runs")
    source = models.CharField(max_length=16)  # k8s | prometheus | kai | kueue | runai
    call = models.CharField(max_length=300)  # "list pods", "GET /api/v1/query_range DCGM_FI_PROF_SM_ACTIVE"
    time = models.DateTimeField()
    ok = models.BooleanField()
    error = models.TextField(blank=True, default="")
    duration_ms = models.IntegerField(default=0)
    rows_written = models.IntegerField(default=0)

    class Meta:
        indexes = [
            models.Index(
                fields=["cluster", "source", "time"], name="sourcerun_latest"
            ),  # /readyz last sweep per source
            models.Index(
                fields=["ok", "time"], name="sourcerun_errors"
            ),  # home: sources with collection errors
        ]

    # Runner.note's calls: the source answered, with no data ("no data: Prometheus holds only 3 min of
    # history"). Not ok, so pages show the gap; not a failure, so the diagnosis keeps its confidence.
    GAP_PREFIX = "no data "

    @property
    def is_gap(self) -> bool:
        return not self.ok and self.call.startswith(self.GAP_PREFIX)

    def __str__(self) -> str:
        return f"{self.source} {self.call} {'ok' if self.ok else 'error'} at {self.time:%H:%M:%S}"
