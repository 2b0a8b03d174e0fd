"""The why-pending panel explains shares and MIG profiles per node, from the same fit rows as the incident."""

from __future__ import annotations

from django.template.loader import render_to_string

from incidents.diagnosis import codes as C
from incidents.diagnosis.checks import run_checks
from incidents.diagnosis.explain import explain_job

from .dx_world import node, world
from .test_mig import JOB as MIG_JOB
from .test_mig import mig_job, mig_node, mig_pod
from .test_shares import two_fragmented_gpus


def test_a_share_shows_each_shared_gpu_against_the_share_asked():
    di = two_fragmented_gpus()
    ex = explain_job(di, di.jobs[0])
    assert ex.request_words == "1 pod(s) × 0.5 of a GPU"
    sh = ex.shares
    assert sh is not None and sh["asked"] == "0.5 of a GPU"
    (n,) = sh["nodes"]
    assert n["node"] == "l40s-01" and n["slots"] == 0 and n["whole_free"] == 0
    assert [(x["index"], x["free"], x["takes"]) for x in n["gpus"]] == [(0, 0.4, 0), (1, 0.4, 0)]
    assert n["gpus"][1]["holders_words"] == "vision/ben-0 (0.3), nlp/emb-0 (0.3)"
    # The verdict says the share, not "each pod needs 0 GPUs", and agrees with the incident's cause.
    assert any("No GPU has 0.5 of a GPU free" in v and "0.8 of a GPU in total" in v for v in ex.verdict), (
        ex.verdict
    )
    assert any(c["code"] == C.GPU_FRAGMENTATION and c["status"] == "supported" for c in ex.causes)
    assert {f.code for f in run_checks(di).findings if f.supported} >= {C.GPU_FRAGMENTATION}


def test_a_share_that_fits_on_one_gpu_counts_it():
    di = two_fragmented_gpus()
    di.jobs[0].state["gpu_share"]["fraction"] = 0.4
    ex = explain_job(di, di.jobs[0])
    assert [x["takes"] for x in ex.shares["nodes"][0]["gpus"]] == [1, 1]


def mig_world():
    pods = [mig_pod("nb-0", "nb", "a100-01", "1g.10gb"), mig_pod("nb-1", "nb", "a100-01", "1g.10gb")]
    h100 = node("h100-01", 8, pool="h100")
    h100.state["labels"]["nvidia.com/mig.capable"] = "true"
    return world(
        subjects=[MIG_JOB],
        nodes=[mig_node("a100-01", {"1g.10gb": 28}), mig_node("a100-02", {"1g.10gb": 28}), h100],
        jobs=[mig_job()],
        pods=pods,
    )


def test_a_mig_job_shows_who_advertises_the_profile_and_what_to_repartition():
    di = mig_world()
    ex = explain_job(di, di.jobs[0])
    assert ex.request_words == "1 pod(s) × 1 MIG 3g.40gb"
    mg = ex.mig
    assert mg is not None and mg["missing"] == ["3g.40gb"]
    rows = {n["node"]: n for n in mg["nodes"]}
    assert set(rows) == {"a100-01", "a100-02"}
    assert rows["a100-01"]["layout"] == "28 × 1g.10gb"
    assert rows["a100-01"]["profiles"] == [
        {"profile": "3g.40gb", "per_pod": 1, "advertised": 0, "used": 0, "free": 0}
    ]
    # The same candidates as mig_profile_unavailable: the idle A100 and the H100 evict nothing, the busy one 2 pods.
    cands = [(c["node"], len(c["evicts"])) for c in mg["candidates"]]
    f = next(f for f in run_checks(di).findings if f.code == C.MIG_PROFILE_UNAVAILABLE)
    assert cands == [(c["node"], len(c["evicts"])) for c in f.facts["candidates"]]
    assert ("a100-01", 2) in cands and cands[0][1] == 0
    assert any("No usable node advertises 3g.40gb" in v for v in ex.verdict), ex.verdict


def test_the_panel_renders_shares_and_mig_tables():
    di = two_fragmented_gpus()
    html = render_to_string("incidents/_why_pending.html", {"explanation": explain_job(di, di.jobs[0])})
    assert "GPU shares per node (each pod asks 0.5 of a GPU)" in html
    assert "vision/ben-0 (0.3), nlp/emb-0 (0.3)" in html
    di = mig_world()
    html = render_to_string("incidents/_why_pending.html", {"explanation": explain_job(di, di.jobs[0])})
    assert "MIG instances per node (each pod asks 1 × 3g.40gb)" in html
    assert "28 × 1g.10gb" in html and "evicts 2 pod(s)" in html


def test_the_panel_names_the_department_and_its_projects_use():
    from .test_department import research_world

    di = research_world()
    ex = explain_job(di, di.jobs[0])
    d = ex.quota.department
    assert d is not None and d.projects_words == "nlp 16 (quota 4), vision 0 (quota 12)"
    html = render_to_string("incidents/_why_pending.html", {"explanation": ex})
    assert "Department <a" in html and "16 GPUs in use of quota 16, limit 16" in html
    assert "(the department holds the job)" in html
    # "Also supported" lists supported causes after the lead only, never an empty list.
    assert ("Also supported:" in html) == bool(ex.also_supported)


def test_jobs_ahead_are_not_why_a_share_or_mig_job_that_fits_nowhere_waits():
    from incidents.diagnosis.scheduling import check_scheduling

    from .test_shares import share_job

    di = two_fragmented_gpus()
    ahead = share_job("early", fraction=0.3)
    ahead.state["submitted"] = "2026-11-28T00:00:00Z"  # same queue, submitted earlier: ordered first
    di.jobs.append(ahead)
    found = {f.code: f for f in check_scheduling(di)}
    assert found[C.QUEUE_PRIORITY].status != "supported", found[C.QUEUE_PRIORITY].statement
    assert found[C.GPU_FRAGMENTATION].supported
    di = mig_world()
    early = mig_job("early")
    early.state["submitted"] = "2026-11-28T00:00:00Z"
    di.jobs.append(early)
    found = {f.code: f for f in check_scheduling(di)}
    assert found[C.QUEUE_PRIORITY].status != "supported", found[C.QUEUE_PRIORITY].statement
