"""Each incident is diagnosed at its own moment, every diagnosis is kept, and pages show the one for t.

Through the real pipeline (simulator, collectors, intake, evidence, diagnosis): vision's quota is cut, so
its training job waits on the quota; later the quota is restored, but by then nlp holds every GPU, so the
same job now waits on capacity. The onset answer and the later answer differ, both are kept, and the
incident page at each cursor shows the matching one.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from harness.scenario_run import run_scenario_file
from incidents.models import DiagnosisRun, Hypothesis, Incident

SCENARIO = """
format: 1
name: quota-then-capacity
summary: >
  The vision quota is cut at 10m and vision/train (2 x 8) waits on it; nlp takes every GPU at 40m; the quota
  is restored at 1h20m, and train now waits on capacity instead.
start: 2026-11-29T00:00:00Z
duration: 2h30m
seed: 4
cluster:
  name: gpu-moments
  scheduler: kai
  nodepools:
    - {name: h100, nodes: 2, gpus_per_node: 8, gpu_product: NVIDIA-H100-80GB-HBM3}
projects:
  - {name: vision, quota: {gpu: 16}, limit: {gpu: 16}}
  - {name: nlp, quota: {gpu: 16}, limit: {gpu: 16}}
jobs:
  - {name: train, project: vision, submit: 15m, pods: 2, gpus_per_pod: 8, runtime: 4h}
  - {name: pretrain, project: nlp, submit: 40m, pods: 2, gpus_per_pod: 8, runtime: 4h}
events:
  - {at: 10m, quota: {project: vision, quota: {gpu: 8}, limit: {gpu: 8}}, actor: platform-admin}
  - {at: 1h20m, quota: {project: vision, quota: {gpu: 16}, limit: {gpu: 16}}, actor: platform-admin}
alerts:
  - {name: GPUJobPendingTooLong, for: 10m}
expect:
  - alert: GPUJobPendingTooLong
    subject: {job: train}
    top: gpu_capacity_shortage
"""


def _top(run: DiagnosisRun) -> str:
    return run.top_code


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("scenario_db")  # the webhook's server threads must see the database
def test_the_onset_answer_and_the_later_one_differ_and_each_cursor_shows_its_own(
    tmp_path: Path, client
) -> None:
    path = tmp_path / "moments.yaml"
    path.write_text(SCENARIO)
    run_scenario_file(str(path))
    incident = Incident.objects.get(alerts__name="GPUJobPendingTooLong")
    runs = list(DiagnosisRun.objects.filter(incident=incident).order_by("at"))
    assert len(runs) >= 2, [(r.at, r.trigger, r.top_code) for r in runs]
    onset, last = runs[0], runs[-1]
    assert onset.trigger == "onset" and abs(onset.at - incident.onset) < timedelta(minutes=1)
    assert _top(onset) == "project_quota_exhausted", onset.top_statement
    assert _top(last) == "gpu_capacity_shortage", last.top_statement
    assert last.trigger == "change" and last.at > onset.at
    # The older run's hypotheses are kept, superseded; the current ones are the latest run's.
    assert Hypothesis.objects.filter(run=onset, superseded=True).exists()
    assert set(Hypothesis.objects.filter(incident=incident).current().values_list("run_id", flat=True)) == {
        last.pk
    }

    User.objects.create_user("ana", password="pw-long-enough-1")
    client.login(username="ana", password="pw-long-enough-1")
    at_onset = client.get(f"/incidents/{incident.pk}/?t={onset.at:%Y-%m-%dT%H:%M:%SZ}&w=1h").content.decode()
    answer = at_onset.split('id="answer"', 1)[1].split("</section>", 1)[0]
    assert "project_quota_exhausted" in answer and "(the onset)" in answer
    later = last.at + timedelta(minutes=5)
    at_later = client.get(f"/incidents/{incident.pk}/?t={later:%Y-%m-%dT%H:%M:%SZ}&w=1h").content.decode()
    answer = at_later.split('id="answer"', 1)[1].split("</section>", 1)[0]
    assert "gpu_capacity_shortage" in answer
    assert "At the onset" in answer and "project_quota_exhausted" in answer  # never silently replaced
    onset_line = answer.split("At the onset", 1)[1].split("</small>", 1)[0]
    assert onset_line.endswith(".") and not onset_line.endswith("..")  # one full stop after the statement


@pytest.mark.django_db
def test_a_busy_database_postpones_the_re_diagnosis_instead_of_failing_the_sweep(monkeypatch, caplog) -> None:
    """SQLite has one writer: when the demo's intake holds it, the sweep's re-diagnosis waits for the next sweep."""
    from datetime import UTC, datetime

    from django.db import OperationalError

    import incidents.diagnosis_run as diagnose
    from collectors.models import Cluster

    Cluster.objects.create(name="gpu-busy", scheduler="kai")

    def locked(*args, **kwargs):
        raise OperationalError("database is locked")

    monkeypatch.setattr(diagnose, "rediagnose_changed", locked)
    with caplog.at_level("WARNING", logger="incidents.diagnosis_run"):
        diagnose.after_sweep(cluster="gpu-busy", at=datetime(2026, 11, 29, tzinfo=UTC))
    assert "postponed to the next sweep" in caplog.text


@pytest.mark.django_db
def test_no_cause_after_a_cause_is_the_symptom_ending_not_a_new_answer(monkeypatch) -> None:
    """A subject change seen before the alert's resolution arrives (the node is back): the last answer stands."""
    from datetime import UTC, datetime

    import incidents.diagnosis_run as diagnose
    from incidents.diagnosis.checks import Diagnosis
    from incidents.diagnosis.types import DiagnosisInput

    t0 = datetime(2026, 11, 29, 3, tzinfo=UTC)
    incident = Incident.objects.create(title="a100-07 not Ready", onset=t0, window_start=t0)
    run = DiagnosisRun.objects.create(
        incident=incident, at=t0, made_at=t0, trigger="onset", top_code="gpu_node_unavailable", supported=1
    )
    Hypothesis.objects.create(
        incident=incident,
        run=run,
        code="gpu_node_unavailable",
        status="supported",
        confidence=0.85,
        statement="x",
    )
    monkeypatch.setattr(
        diagnose, "load_incident_input", lambda inc, t: DiagnosisInput(t=t, onset=t0, cluster="")
    )
    monkeypatch.setattr(diagnose, "run_checks", lambda di: Diagnosis())
    later = t0 + timedelta(hours=3)
    assert diagnose.diagnose_incident(incident.pk, later, trigger="change", only_if_changed=True) == []
    runs = list(DiagnosisRun.objects.filter(incident=incident))
    assert len(runs) == 1 and runs[0].seen_until == later and runs[0].top_code == "gpu_node_unavailable"


@pytest.mark.django_db
def test_only_a_material_change_of_a_subject_is_diagnosed_again(monkeypatch) -> None:
    """KAI rewriting a waiting job's counts is not a new moment (the run stands, no diagnosis); a quota change is."""
    from datetime import UTC, datetime

    import incidents.diagnosis_run as diagnose
    from collectors.models import Cluster, Entity, EntityVersion
    from incidents.models import Alert, IncidentSubject

    t0 = datetime(2026, 11, 29, 3, tzinfo=UTC)
    cluster = Cluster.objects.create(name="gpu-material", scheduler="kai")
    incident = Incident.objects.create(title="train waits", onset=t0, window_start=t0, cluster=cluster)
    Alert.objects.create(
        fingerprint="f1",
        name="GPUJobPendingTooLong",
        starts_at=t0,
        received_at=t0,
        updated_at=t0,
        incident=incident,
    )
    run = DiagnosisRun.objects.create(
        incident=incident, at=t0, made_at=t0, trigger="onset", top_code="project_quota_exhausted", supported=1
    )

    def entity(kind: str, name: str) -> Entity:
        e = Entity.objects.create(
            cluster=cluster, kind=kind, namespace="vision", name=name, first_seen=t0, last_seen=t0
        )
        IncidentSubject.objects.create(
            incident=incident, entity=e, role="subject" if kind == "job" else "related"
        )
        return e

    job, project = entity("job", "train"), entity("project", "vision")

    def versions(e: Entity, states: list[tuple[int, dict]]) -> None:
        for i, (minute, state) in enumerate(states):
            end = states[i + 1][0] if i + 1 < len(states) else None
            EntityVersion.objects.create(
                entity=e,
                cluster=cluster,
                kind=e.kind,
                valid_from=t0 + timedelta(minutes=minute),
                valid_to=None if end is None else t0 + timedelta(minutes=end),
                state=state,
            )

    def waiting(allocated: int, minute: int) -> dict:
        return {
            "phase": "Pending",
            "scheduling": {
                "reason": "OverLimit",
                "since": f"2026-11-29T03:{minute:02d}:00Z",
                "message": f"Limit is 8 GPUs, currently {allocated} GPUs allocated and workload requested 4 GPUs.",
            },
        }

    versions(job, [(-1, waiting(56, 0)), (20, waiting(50, 20)), (40, waiting(47, 40))])
    versions(project, [(-60, {"quota_gpus": 8, "limit_gpus": 8})])
    calls: list[datetime] = []
    monkeypatch.setattr(diagnose, "diagnose_incident", lambda pk, t, **kw: calls.append(t) or [])
    # this test is about the subject's own changes: the periodic check of a waiting job is weighed apart
    monkeypatch.setattr(diagnose, "RECHECK", timedelta(days=1))

    assert diagnose.rediagnose_changed(t0 + timedelta(minutes=55), cluster.pk) == 0
    assert calls == []  # only the counts moved: no diagnosis, the onset answer stands up to the newest change
    run.refresh_from_db()
    assert run.seen_until == t0 + timedelta(minutes=40)

    EntityVersion.objects.filter(entity=project).update(valid_to=t0 + timedelta(minutes=70))
    versions(project, [(70, {"quota_gpus": 64, "limit_gpus": 64})])
    diagnose.rediagnose_changed(t0 + timedelta(minutes=90), cluster.pk)
    # the quota raised while it still waits: diagnosed as of then
    assert calls == [t0 + timedelta(minutes=70)]

    # A material change sooner than SPACING after the latest run, and nothing after it: not lost, diagnosed as
    # of SPACING after that run, once settled.
    calls.clear()
    DiagnosisRun.objects.create(
        incident=incident,
        at=t0 + timedelta(minutes=70),
        made_at=t0,
        trigger="change",
        top_code="x",
        supported=1,
    )
    EntityVersion.objects.filter(entity=project, valid_to__isnull=True).update(
        valid_to=t0 + timedelta(minutes=75)
    )
    versions(project, [(75, {"quota_gpus": 4, "limit_gpus": 4})])
    diagnose.rediagnose_changed(t0 + timedelta(minutes=94), cluster.pk)
    assert calls == []  # 70 + SPACING = 85 is later than now - SETTLE = 84
    diagnose.rediagnose_changed(t0 + timedelta(minutes=110), cluster.pk)
    assert calls == [t0 + timedelta(minutes=85)]


@pytest.mark.django_db
def test_a_first_diagnosis_made_after_a_later_alert_joined_is_not_called_the_onset(monkeypatch) -> None:
    """Onset 05:45; the first diagnosis is made once a second alert joined at 07:01: it describes 07:01 and says
    it is that alert's moment, not "the onset" (the incident page's banner read "as of 07:01 (the onset)")."""
    from datetime import UTC, datetime

    import incidents.diagnosis_run as diagnose
    from collectors.models import Cluster, SourceRun
    from incidents.diagnosis.checks import Diagnosis
    from incidents.diagnosis.types import DiagnosisInput
    from incidents.models import Alert

    onset, joined = datetime(2026, 11, 29, 5, 45, tzinfo=UTC), datetime(2026, 11, 29, 7, 1, tzinfo=UTC)
    cluster = Cluster.objects.create(name="gpu-late", scheduler="kai")
    SourceRun.objects.create(cluster=cluster, source="k8s", call="list nodes", time=joined, ok=True)
    incident = Incident.objects.create(title="Xid", onset=onset, window_start=onset, cluster=cluster)
    for fp, at in (("a", onset), ("b", joined)):
        Alert.objects.create(
            fingerprint=fp, name="GPUXid", starts_at=at, received_at=at, updated_at=at, incident=incident
        )
    monkeypatch.setattr(
        diagnose, "load_incident_input", lambda inc, t: DiagnosisInput(t=t, onset=onset, cluster="gpu-late")
    )
    monkeypatch.setattr(diagnose, "run_checks", lambda di: Diagnosis())
    diagnose.diagnose_incident(incident.pk)
    (run,) = DiagnosisRun.objects.filter(incident=incident)
    assert (run.at, run.trigger) == (joined, "alert")
    # a first run at the onset itself is the onset's, whatever asked for it
    incident.alerts.filter(fingerprint="b").delete()
    run.delete()
    diagnose.diagnose_incident(incident.pk, trigger="manual")
    (run,) = DiagnosisRun.objects.filter(incident=incident)
    assert (run.at, run.trigger) == (onset, "onset")


@pytest.mark.django_db
def test_a_waiting_job_is_checked_again_when_nothing_of_its_own_moved(monkeypatch) -> None:
    """Freed GPUs went to a job ahead, a fault it was told to wait for cleared: nothing of the job's own changed,
    yet its answer may have. A workload's incident is diagnosed again once every RECHECK of cluster time (kept
    only if the answer differs); a node's incident is not (its own changes say when)."""
    from collectors.models import Cluster, Entity
    from incidents import diagnosis_run as diagnose
    from incidents.models import Alert, IncidentSubject

    t0 = datetime(2026, 11, 29, 3, tzinfo=UTC)
    cluster = Cluster.objects.create(name="gpu-recheck", scheduler="kai")
    made: dict[str, int] = {}
    for kind, name in (("job", "train"), ("node", "h100-01")):
        inc = Incident.objects.create(title=name, onset=t0, window_start=t0, cluster=cluster)
        Alert.objects.create(
            fingerprint=name, name="X", starts_at=t0, received_at=t0, updated_at=t0, incident=inc
        )
        DiagnosisRun.objects.create(
            incident=inc, at=t0, made_at=t0, trigger="onset", top_code="c", supported=1
        )
        e = Entity.objects.create(
            cluster=cluster,
            kind=kind,
            namespace="vision" if kind == "job" else "",
            name=name,
            first_seen=t0,
            last_seen=t0,
        )
        IncidentSubject.objects.create(incident=inc, entity=e, role="subject")
        made[kind] = inc.pk
    calls: list[tuple[int, datetime]] = []
    monkeypatch.setattr(diagnose, "diagnose_incident", lambda pk, t, **kw: calls.append((pk, t)) or [])
    diagnose.rediagnose_changed(t0 + timedelta(minutes=35), cluster.pk)
    assert calls == []  # 25 min after the onset's moment: not yet
    diagnose.rediagnose_changed(t0 + timedelta(minutes=45), cluster.pk)
    assert calls == [(made["job"], t0 + timedelta(minutes=35))]  # as of now - SETTLE, the job's incident only


@pytest.mark.django_db
def test_a_cleared_fault_does_not_stay_the_cause_of_a_job_that_still_waits(monkeypatch) -> None:
    """The job it blamed still waits, yet nothing supports the node any more (it is Ready again): that is news,
    kept as a run of its own, not "the symptom ended" (which keeps the stale answer)."""
    import incidents.diagnosis_run as diagnose
    from incidents.diagnosis.checks import Diagnosis
    from incidents.diagnosis.types import DiagnosisInput, EntityState, Ref

    t0 = datetime(2026, 11, 29, 3, tzinfo=UTC)
    incident = Incident.objects.create(title="train waits", onset=t0, window_start=t0)
    DiagnosisRun.objects.create(
        incident=incident, at=t0, made_at=t0, trigger="onset", top_code="gpu_node_unavailable", supported=1
    )
    waiting = EntityState("job", "train", "vision", state={"phase": "Pending"})
    monkeypatch.setattr(
        diagnose,
        "load_incident_input",
        lambda inc, t: DiagnosisInput(
            t=t, onset=t0, cluster="", subjects=[Ref("job", "train", "vision")], jobs=[waiting]
        ),
    )
    monkeypatch.setattr(diagnose, "run_checks", lambda di: Diagnosis())
    later = t0 + timedelta(hours=3)
    diagnose.diagnose_incident(incident.pk, later, trigger="recheck", only_if_changed=True)
    runs = list(DiagnosisRun.objects.filter(incident=incident).order_by("at"))
    assert [(r.at, r.top_code) for r in runs] == [(t0, "gpu_node_unavailable"), (later, "")]


@pytest.mark.django_db
def test_the_home_page_groups_a_past_cursor_by_the_causes_in_force_then() -> None:
    """Two jobs waited on one quota at 03:00; at 05:00 one of them is re-diagnosed (capacity). At 04:00 they are
    one problem, as they were then; now they are two rows. The incidents' own keys are the current ones."""
    from datetime import UTC, datetime

    from web.console.home import open_incidents

    t0 = datetime(2026, 11, 29, 3, tzinfo=UTC)
    quota = "project_quota_exhausted|project/vision"
    made = []
    for name in ("train", "eval"):
        inc = Incident.objects.create(title=f"{name} waits", onset=t0, window_start=t0, cause_key=quota)
        DiagnosisRun.objects.create(
            incident=inc, at=t0, made_at=t0, trigger="onset", top_code="project_quota_exhausted",
            cause_key=quota, supported=1,
        )
        made.append(inc)
    later = t0 + timedelta(hours=2)
    DiagnosisRun.objects.create(
        incident=made[1], at=later, made_at=later, trigger="recheck", top_code="gpu_capacity_shortage",
        cause_key="", supported=1,
    )
    Incident.objects.filter(pk=made[1].pk).update(cause_key="")

    then = open_incidents(t0 + timedelta(hours=1))
    now = open_incidents(later + timedelta(minutes=5))

    assert [r.members for r in then] == [2], [(r.incident.title, r.members) for r in then]
    assert then[0].problem is not None
    assert sorted(r.members for r in now) == [1, 1]
