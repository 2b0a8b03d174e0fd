"""Alerts, incidents, their frozen evidence, hypotheses, proposed actions, handoffs and the audit trail.

Incidents point at inventory (``collectors.Entity``), never the other way round.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.urls import reverse

from collectors.models import Cluster, Entity


class Alert(models.Model):
    """One Alertmanager alert: identity is (fingerprint, starts_at); resends update it in place."""

    fingerprint = models.CharField(max_length=64)
    name = models.CharField(max_length=200)  # labels.alertname
    status = models.CharField(max_length=16, default="firing")  # firing | resolved
    severity = models.CharField(max_length=32, blank=True, default="")
    cluster_name = models.CharField(max_length=63, blank=True, default="")
    labels = models.JSONField(default=dict)
    annotations = models.JSONField(default=dict)
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField(null=True, blank=True)
    generator_url = models.CharField(max_length=2000, blank=True, default="")
    group_key = models.CharField(max_length=2000, blank=True, default="")
    receiver = models.CharField(max_length=200, blank=True, default="")
    raw = models.JSONField(default=dict)  # the alert object as received (after validation)
    received_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    processed_at = models.DateTimeField(null=True, blank=True)  # outbox: NULL = not yet grouped/diagnosed
    incident = models.ForeignKey(
        "Incident", on_delete=models.SET_NULL, null=True, blank=True, related_name="alerts"
    )

    class Meta:
        constraints = [models.UniqueConstraint(fields=["fingerprint", "starts_at"], name="alert_identity")]
        indexes = [
            models.Index(
                fields=["processed_at", "received_at"], name="alert_outbox"
            ),  # sweeper: WHERE processed_at IS NULL
            models.Index(fields=["status", "starts_at"], name="alert_status"),  # home: firing alerts
        ]
        ordering = ["-starts_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.status}) since {self.starts_at:%Y-%m-%d %H:%M}"

    def get_absolute_url(self) -> str:
        return reverse("incidents:alert", args=[self.pk])


class Incident(models.Model):
    """An alert (or several) about the same subjects, with the evidence frozen for its window."""

    STATUSES = [
        ("open", "open"),
        ("acknowledged", "acknowledged"),
        ("investigating", "investigating"),
        ("mitigated", "mitigated"),
        ("resolved", "resolved"),
    ]
    HUMAN_STATUSES = ("acknowledged", "investigating", "mitigated")  # someone holds it: never auto-resolved
    SEVERITIES = [("critical", "critical"), ("warning", "warning"), ("info", "info")]

    title = models.CharField(max_length=300)
    severity = models.CharField(max_length=16, choices=SEVERITIES, default="warning")
    status = models.CharField(max_length=16, choices=STATUSES, default="open")
    cluster = models.ForeignKey(
        Cluster, on_delete=models.SET_NULL, null=True, blank=True, related_name="incidents"
    )
    onset = models.DateTimeField()
    window_start = models.DateTimeField()
    window_end = models.DateTimeField(null=True, blank=True)  # NULL while open
    resolved_at = models.DateTimeField(null=True, blank=True)
    # incidents.lifecycle: resolved by rcaweb (alerts resolved, subject healthy for the quiet period), not a person
    auto_resolved = models.BooleanField(default=False)
    # a held incident (HUMAN_STATUSES) whose alerts resolved and subject stayed healthy: since when, for its holder
    all_clear_at = models.DateTimeField(null=True, blank=True)
    status_set_at = models.DateTimeField(
        null=True, blank=True
    )  # when a person last set the status (services)
    owner = models.CharField(max_length=150, blank=True, default="")
    subjects = models.ManyToManyField(Entity, through="IncidentSubject", related_name="incidents")
    related = models.ManyToManyField("self", blank=True, symmetrical=True)
    unresolved_subject = models.CharField(
        max_length=500, blank=True, default=""
    )  # labels that named nothing known
    collection_state = models.CharField(max_length=16, default="pending")  # pending | running | done | failed
    collected_at = models.DateTimeField(null=True, blank=True)
    diagnosed_at = models.DateTimeField(null=True, blank=True)
    # the current run's cause_key (incidents.problems): incidents sharing one fault are one problem
    cause_key = models.CharField(max_length=300, blank=True, default="")
    created = models.DateTimeField(auto_now_add=True)
    # Not a column: incidents.grouping sets it on the instance it returns (new or grown: collect evidence again);
    # readers use getattr(incident, "needs_evidence", False).
    needs_evidence: bool

    class Meta:
        indexes = [models.Index(fields=["status", "onset"], name="incident_status")]  # open incidents panel
        ordering = ["-onset"]

    def __str__(self) -> str:
        return f"#{self.pk} {self.title}"

    def get_absolute_url(self) -> str:
        return reverse("incidents:incident", args=[self.pk])

    def ended_at(self, now: datetime) -> datetime | None:
        """The resolution, when it happened by ``now``; None while the incident is still going on at ``now``."""
        if self.status == "resolved" and self.resolved_at is not None and self.resolved_at <= now:
            return self.resolved_at
        return None

    def duration_at(self, now: datetime) -> timedelta:
        """Onset → resolution, or → ``now`` while unresolved (never negative: ``now`` may precede the onset)."""
        return max(timedelta(0), (self.ended_at(now) or now) - self.onset)


class IncidentSubject(models.Model):
    """An entity an incident is about; ``role`` says how it was linked (alert label, related)."""

    incident = models.ForeignKey(Incident, on_delete=models.CASCADE)
    entity = models.ForeignKey(Entity, on_delete=models.CASCADE)
    role = models.CharField(max_length=32, default="subject")  # subject | related

    class Meta:
        constraints = [models.UniqueConstraint(fields=["incident", "entity"], name="incident_subject_once")]
        indexes = [
            # incidents.ordering's impact subqueries, one per incident listed: WHERE incident_id=? AND
            # role='subject'. A pending job's incident relates hundreds of candidate nodes and GPUs; without it
            # each lookup reads them all to keep its one or two subjects.
            models.Index(
                fields=["incident", "entity"], condition=models.Q(role="subject"), name="incident_subjects"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.incident_id} -> {self.entity_id} ({self.role})"


class Observation(models.Model):
    """One fact with provenance. ``error`` set means the source could not answer: an absence is evidence too."""

    SOURCES = [
        ("k8s", "Kubernetes"),
        ("prometheus", "Prometheus"),
        ("kai", "KAI Scheduler"),
        ("kueue", "Kueue"),
        ("runai", "Run:ai"),
        ("change", "change history"),
        ("alert", "alert"),
        ("log", "container log"),
        ("inventory", "inventory"),
    ]

    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="observations")
    entity = models.ForeignKey(Entity, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    source = models.CharField(max_length=16, choices=SOURCES)
    kind = models.CharField(
        max_length=48
    )  # pod_state | node_state | event | dcgm_series | quota | change | log | ...
    locator = models.CharField(max_length=1000)  # API path, PromQL, object ref
    observed_at = models.DateTimeField()  # the time of the fact
    collected_at = models.DateTimeField()
    content = models.JSONField(default=dict)
    summary = models.CharField(max_length=500, blank=True, default="")
    error = models.TextField(blank=True, default="")
    dedup_key = models.CharField(max_length=300)  # a rerun of collection never duplicates a fact

    class Meta:
        constraints = [models.UniqueConstraint(fields=["incident", "dedup_key"], name="observation_once")]
        indexes = [models.Index(fields=["incident", "observed_at"], name="obs_incident_time")]  # timeline
        ordering = ["observed_at", "id"]

    def __str__(self) -> str:
        return f"[{self.source}] {self.summary or self.locator}"


class DiagnosisRun(models.Model):
    """One diagnosis of an incident, as of the moment ``at`` it describes; every run is kept.

    The first describes the onset (the first alert's firing time); later runs come when an alert joins
    or a subject changes while the incident fires. Pages show the run for the cursor (the latest with
    ``at`` at or before t); the hypotheses and actions of older runs are kept with ``superseded`` set.
    """

    TRIGGERS = [
        ("onset", "onset"),
        ("alert", "an alert joined"),
        ("change", "a subject changed"),
        ("recheck", "checked again as the queue moved"),
        ("manual", "asked by hand"),
    ]

    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="diagnoses")
    at = models.DateTimeField()  # the moment the inventory was read as of
    made_at = models.DateTimeField()
    trigger = models.CharField(max_length=16, choices=TRIGGERS, default="onset")
    top_code = models.CharField(max_length=48, blank=True, default="")  # "" = no cause found
    top_statement = models.TextField(blank=True, default="")
    # The incident's title as this run tells it (incidents.titles): pages at a cursor show the run in force's
    title = models.CharField(max_length=300, blank=True, default="")
    cause_key = models.CharField(max_length=300, blank=True, default="")  # incidents.problems.cause_key(top)
    supported = models.IntegerField(default=0)  # supported causes (not counting "elsewhere" context)
    checked = models.JSONField(default=list)  # codes examined, for "no cause found: checked …"
    # Changes up to this moment were diagnosed again and left the answer as it is (no new run for them).
    seen_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["incident", "at"], name="diagnosis_incident_at")]
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"diagnosis of incident {self.incident_id} at {self.at:%Y-%m-%d %H:%M} ({self.top_code or 'no cause'})"


class DiagnosisQuerySet(models.QuerySet):
    """Hypotheses and actions: ``current()`` is the latest diagnosis only (older runs are kept superseded)."""

    def current(self) -> DiagnosisQuerySet:
        return self.filter(superseded=False)

    def causes(self) -> DiagnosisQuerySet:
        """Current hypotheses about the subject (not the faults "also happening in the cluster")."""
        return self.filter(superseded=False, scope="cause")


class Hypothesis(models.Model):
    """A candidate explanation built only from cited observations (no citation, no hypothesis).

    ``scope`` "cause" is about the incident's subject and its causal neighbourhood; "elsewhere" is a fault
    seen in the cluster at the same moment that touches nothing the subject needs: listed as context,
    never ranked as a cause.
    """

    STATUSES = [("supported", "supported"), ("refuted", "refuted"), ("unverified", "unverified")]
    SCOPES = [("cause", "cause"), ("elsewhere", "also happening in the cluster")]

    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="hypotheses")
    run = models.ForeignKey(
        DiagnosisRun, on_delete=models.CASCADE, null=True, blank=True, related_name="hypotheses"
    )
    superseded = models.BooleanField(default=False)  # a later run replaced it (kept for the history)
    scope = models.CharField(max_length=16, choices=SCOPES, default="cause")
    code = models.CharField(max_length=48)  # incidents.diagnosis.codes
    statement = models.TextField()
    status = models.CharField(max_length=16, choices=STATUSES)
    confidence = models.FloatField()
    rank = models.IntegerField(default=0)
    subject = models.ForeignKey(Entity, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    next_questions = models.JSONField(default=list)
    why = models.TextField(blank=True, default="")  # for refuted/unverified: why
    evidence = models.ManyToManyField(Observation, through="Citation", related_name="hypotheses")
    created = models.DateTimeField(auto_now_add=True)

    objects = DiagnosisQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["incident", "superseded", "rank"], name="hypothesis_current")]
        ordering = ["rank", "id"]

    def __str__(self) -> str:
        return f"{self.code} ({self.status}, {self.confidence:.2f})"

    def clean(self) -> None:
        if not 0.0 <= self.confidence <= 1.0:
            raise ValidationError({"confidence": "must be between 0 and 1"})


class Citation(models.Model):
    """An observation a hypothesis cites, as support or as refutation."""

    hypothesis = models.ForeignKey(Hypothesis, on_delete=models.CASCADE)
    observation = models.ForeignKey(Observation, on_delete=models.CASCADE)
    role = models.CharField(max_length=16, default="supports")  # supports | refutes

    class Meta:
        constraints = [models.UniqueConstraint(fields=["hypothesis", "observation"], name="cite_once")]

    def __str__(self) -> str:
        return f"{self.hypothesis_id} {self.role} {self.observation_id}"


class ProposedAction(models.Model):
    """What an operator could do, with its impact, verification and rollback. rcaweb never executes it."""

    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="actions")
    run = models.ForeignKey(
        DiagnosisRun, on_delete=models.CASCADE, null=True, blank=True, related_name="actions"
    )
    superseded = models.BooleanField(default=False)
    hypothesis = models.ForeignKey(
        Hypothesis, on_delete=models.CASCADE, null=True, blank=True, related_name="actions"
    )
    title = models.CharField(max_length=300)
    command = models.TextField(blank=True, default="")  # e.g. the kubectl command to run by hand
    impact = models.TextField()
    verify = models.TextField()
    rollback = models.TextField()
    rank = models.IntegerField(default=0)
    created = models.DateTimeField(auto_now_add=True)

    objects = DiagnosisQuerySet.as_manager()

    class Meta:
        ordering = ["rank", "id"]

    def __str__(self) -> str:
        return self.title


class HandoffNote(models.Model):
    """A journal entry for the next shift; edits are kept as AuditEntry rows."""

    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="handoffs")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    author_name = models.CharField(max_length=150)
    created = models.DateTimeField()
    updated = models.DateTimeField()
    summary = models.TextField()
    checked = models.TextField(blank=True, default="")  # hypotheses checked, with result
    missing = models.TextField(blank=True, default="")  # evidence still missing
    next_steps = models.TextField(blank=True, default="")
    owner = models.CharField(max_length=150, blank=True, default="")

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return f"handoff #{self.pk} on incident {self.incident_id} by {self.author_name}"


class AuditEntry(models.Model):
    """Who changed what, when (NetBox ObjectChange, cut down). Written explicitly by incidents.services."""

    time = models.DateTimeField()
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    user_name = models.CharField(max_length=150)
    request_id = models.CharField(max_length=64, blank=True, default="")
    action = models.CharField(max_length=48)  # incident.status, handoff.create, handoff.edit, ...
    target_type = models.CharField(max_length=48)
    target_id = models.BigIntegerField()
    object_repr = models.CharField(max_length=300)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["target_type", "target_id", "time"], name="audit_target")
        ]  # history tab
        ordering = ["-time", "-id"]

    def __str__(self) -> str:
        return f"{self.time:%Y-%m-%d %H:%M} {self.user_name} {self.action} {self.object_repr}"
