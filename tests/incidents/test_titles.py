"""incidents.titles: a title names the subject, the symptom and, once diagnosed, the cause with its numbers."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from collectors.inventory import record_states
from collectors.models import Cluster, SourceRun
from incidents.diagnosis_run import diagnose_incident
from incidents.grouping import group_alert
from incidents.models import Alert
from incidents.titles import build_title, cause_gist, subject_label, title_parts
from tests.incidents.test_diagnose import ONSET, T0, _job, _node, _queue

# The statement incidents.diagnosis.quota_causes.quota_findings wrote for the quota-cut-blocks-training scenario
# (manage.py run_scenario simulator/scenarios/quota-cut-blocks-training.yaml).
QUOTA_CUT = (
    "project vision uses 0 of 8 GPUs of quota, limit 8 since 01:05, when platform-admin changed quota_gpus "
    "from 16 to 8; vision/resnet-train needs 16 more, 16 would exceed the limit of 8."
)


def test_the_subject_is_named_as_operators_say_it() -> None:
    assert subject_label([("job", "vision", "resnet-train"), ("pod", "vision", "resnet-train-0")], {}) == (
        "vision/resnet-train-0"
    )
    assert subject_label([("job", "vision", "resnet-train")], {"job_name": "resnet-train"}) == (
        "vision/resnet-train"
    )
    gpu = [("gpu", "", "GPU-1c902699"), ("node", "", "h100-02")]
    assert subject_label(gpu, {"Hostname": "h100-02", "gpu": "3"}) == "h100-02 GPU 3"
    assert subject_label(gpu, {}) == "h100-02 GPU-1c902699"
    assert subject_label([("queue", "", "nlp")], {}) == "queue nlp"
    # Labels that named nothing known still name the subject.
    assert subject_label([], {"node": "gpu-99"}) == "gpu-99"
    assert subject_label([], {"namespace": "ml", "pod": "x-0"}) == "ml/x-0"
    assert subject_label([], {"severity": "warning"}) == ""


def test_the_quota_cause_reads_with_its_numbers_and_who_cut_it() -> None:
    assert cause_gist("project_quota_exhausted", QUOTA_CUT) == (
        "project vision quota 8 < 16 needed, cut from 16 by platform-admin at 01:05"
    )
    raised = QUOTA_CUT.replace("from 16 to 8", "from 4 to 8")
    assert "changed from 4 by platform-admin" in cause_gist("project_quota_exhausted", raised)
    # The limit holds, the quota was cut: the title says which number moved, not "limit 32, cut from 48".
    quota_cut_limit_holds = (
        "project vision uses 24 of 24 GPUs of quota, limit 32 since 05:29, when platform-admin changed quota_gpus "
        "from 48 to 24; vision/resnet-train needs 40 more, 64 would exceed the limit of 32."
    )
    assert cause_gist("project_quota_exhausted", quota_cut_limit_holds) == (
        "project vision limit 32 < 64 needed, quota cut from 48 by platform-admin at 05:29"
    )
    no_cut = (
        "project nlp uses 20 of 24 GPUs of quota, limit 32; nlp/bert is non-preemptible and needs 8 more, "
        "28 would exceed the quota."
    )
    assert cause_gist("project_quota_exhausted", no_cut) == "project nlp quota 24 < 28 needed"


def test_a_capacity_shortage_says_need_free_room_and_place_in_line() -> None:
    shortage = (
        "vision/vb-031 needs 8 GPUs (1 pod(s) × 8 GPU); only 1 are free on the 31 usable node(s) (238 of their 239 "
        "allocatable GPUs allocated at 20:51); fixing the device plugin advertising 0 of 8 GPUs on a100-02 would "
        "start nlp/nb-046 first (its queue is further below its fair share, on a100-02); vision/vb-031 is 7th in "
        "line for that room."
    )
    assert cause_gist("gpu_capacity_shortage", shortage) == (
        "needs 8 GPUs (1 pod(s) × 8 GPU), 1 free on 31 usable nodes; 7th in line"
    )
    alone = "edge/d needs 4 GPUs (1 pod(s) × 4 GPU); only 0 are free on the 1 usable node(s) (8 of their 8 ...)."
    assert cause_gist("gpu_capacity_shortage", alone) == "needs 4 GPUs (1 pod(s) × 4 GPU), 0 free on 1 usable node"


def test_other_causes_keep_their_first_sentence_and_numbers() -> None:
    node = "h100-02 is NotReady (NodeStatusUnknown) since 00:40; its 8 GPUs take no new pods."
    assert cause_gist("gpu_node_unavailable", node) == (
        "h100-02 is NotReady (NodeStatusUnknown) since 00:40; its 8 GPUs take no new pods"
    )
    also = (
        "vision/vit-train (2 pod(s) × 8 GPU) would fit if node(s) NotReady on h100-02 were fixed; it does not "
        "fit without them. Also: h100-02 is NotReady (NodeStatusUnknown) since 00:40."
    )
    assert cause_gist("gpu_node_unavailable", also).endswith("it does not fit without them")
    assert cause_gist("gpu_thermal_throttling", "GPU 3 at 0.02 % over 85 C. More text.") == (
        "GPU 3 at 0.02 % over 85 C"
    )
    long = "word " * 80
    gist = cause_gist("x", long)
    assert len(gist) <= 160 and gist.endswith("…")


def test_the_title_is_subject_symptom_and_cause() -> None:
    assert build_title("vision/resnet-train", "GPUJobPendingTooLong", "GPU job pending too long") == (
        "vision/resnet-train pending"
    )
    assert build_title(
        "vision/resnet-train", "GPUJobPendingTooLong", "", "project_quota_exhausted", QUOTA_CUT
    ) == (
        "vision/resnet-train pending: project vision quota 8 < 16 needed, cut from 16 by platform-admin at 01:05"
    )
    # An alert rcaweb has no words for keeps its name and summary until a cause is known.
    assert build_title("h100-01", "DiskFull", "/var is 99% full") == "h100-01: DiskFull — /var is 99% full"
    assert build_title("", "Watchdog", "") == "Watchdog"
    assert build_title("", "Watchdog", "always firing") == "Watchdog: always firing"
    assert len(build_title("x" * 400, "NodeNotReady")) <= 300


def test_hostile_label_text_is_kept_as_text_for_the_templates_to_escape() -> None:
    evil = '<script>alert("x")</script>'
    assert build_title(subject_label([], {"node": evil}), "NodeNotReady") == f"{evil} not Ready"


@pytest.fixture
def quota_world(db):
    cluster = Cluster.objects.create(name="gpu-prod", scheduler="kai")
    record_states(
        cluster, [_node("h100-01"), _node("h100-02"), _node("h100-03"), *_queue(16, 24), _job()], T0
    )
    record_states(cluster, _queue(8, 8), T0 + timedelta(hours=2))  # platform-admin cuts the quota
    SourceRun.objects.create(
        cluster=cluster, source="k8s", call="list pods", time=ONSET + timedelta(minutes=5), ok=True
    )
    now = timezone.now()
    alert = Alert.objects.create(
        fingerprint="fp-pending",
        name="GPUJobPendingTooLong",
        severity="warning",
        cluster_name="gpu-prod",
        labels={
            "alertname": "GPUJobPendingTooLong",
            "cluster": "gpu-prod",
            "namespace": "vision",
            "job_name": "resnet-train",
        },
        annotations={"summary": "GPU job pending too long"},
        starts_at=ONSET,
        received_at=now,
        updated_at=now,
    )
    return group_alert(alert)


def test_grouping_names_the_subject_and_diagnosis_adds_the_cause(quota_world) -> None:
    incident = quota_world
    assert incident.title == "vision/resnet-train pending"
    diagnose_incident(incident.pk, ONSET)
    incident.refresh_from_db()
    assert incident.title == (
        "vision/resnet-train pending: project vision quota 8 < 16 needed, cut from 16 by platform-admin at 02:00"
    )


def test_no_cause_found_keeps_the_alert_only_title(quota_world) -> None:
    incident = quota_world
    diagnose_incident(incident.pk, ONSET)
    record_states(incident.cluster, _queue(64, 64), ONSET + timedelta(minutes=5))  # quota back: it fits
    diagnose_incident(incident.pk, ONSET + timedelta(minutes=10))  # a later moment: the current run
    incident.refresh_from_db()
    assert incident.diagnoses.order_by("-at").first().top_code == ""
    assert incident.title == "vision/resnet-train pending"


def test_the_gist_does_not_repeat_the_subject_nor_spell_gpu_uuids() -> None:
    from incidents.titles import build_title

    title = build_title(
        "llm/llm-pretrain",
        "GPUJobPendingTooLong",
        code="gpu_ecc_errors",
        statement="llm/llm-pretrain (2 pod(s) × 8 GPU) would fit if GPU 3 on h100-02 (2 double-bit ECC errors) "
        "were repaired. Also: more.",
    )
    assert title == (
        "llm/llm-pretrain pending: (2 pod(s) × 8 GPU) would fit if GPU 3 on h100-02 (2 double-bit ECC errors) "
        "were repaired"
    )
    title = build_title(
        "h100-02 GPU 3",
        "GPUECCDoubleBitError",
        code="gpu_ecc_errors",
        statement="GPU 3 (GPU-4c5017d0-effb-8b3c-e248-f131743a97ec) on h100-02 counts 2 double-bit (uncorrectable) "
        "ECC errors since 01:00.",
    )
    assert title == (
        "h100-02 GPU 3 double-bit ECC errors: GPU 3 on h100-02 counts 2 double-bit (uncorrectable) ECC errors "
        "since 01:00"
    )


@pytest.mark.parametrize(
    ("subject", "alert", "summary", "code", "statement"),
    [
        ("vision/resnet-train", "GPUJobPendingTooLong", "", "", ""),
        (
            "vision/resnet-train",
            "GPUJobPendingTooLong",
            "",
            "gpu_oom",
            "CUDA out of memory: batch 32 — too big.",
        ),
        ("h100-03 GPU 5", "GPUMissing", "", "gpu_xid_fault", "GPU 5 reported Xid 79: it fell off the bus."),
        ("gpu-99", "DiskFull", "DiskFull fired", "", ""),
        ("gpu-99", "DiskFull", "", "", ""),
        ("gpu-99", "DiskFull", "", "gpu_oom", "Out of memory: a — b."),
        ("", "DiskFull", "the disk of gpu-99 is full", "", ""),
    ],
)
def test_a_title_splits_into_its_short_part_and_cause_line(
    subject: str, alert: str, summary: str, code: str, statement: str
) -> None:
    title = build_title(subject, alert, summary, code, statement)
    short, cause = title_parts(title)
    assert short == build_title(subject, alert)  # the short part is the title without a cause or summary
    assert cause == title[len(short) :].removeprefix(": ").removeprefix(" — ")
