"""End to end over real HTTP: the simulator serves a cluster, the real collectors sweep it, and the inventory
as of t equals the simulator's state at t, for every kind, on KAI and on Kueue."""

from __future__ import annotations

import gc
import weakref
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from django.utils.timezone import now as timezone_now

from collectors import inventory
from collectors.models import Change, EntityVersion, KubeEvent, SourceRun, TelemetrySample
from collectors.sweep import sweep_cluster, sweep_events, sweep_telemetry
from simulator.kube.context import build_context
from tests.collectors.simhelpers import register, served, small_world

pytestmark = pytest.mark.django_db


def expected(world: Any) -> dict[str, dict]:
    """What the simulator says is true now, per kind, in the inventory's terms."""
    ctx = build_context(world)
    out: dict[str, dict] = {"node": {}, "pod": {}, "job": {}, "project": {}, "gpu": {}}
    for n in world.nodes.values():
        out["node"][("", n.name)] = {
            "ready": n.ready,
            "gpus": n.capacity_gpus,
            "gpus_allocatable": n.allocatable_gpus,
            "unschedulable": n.unschedulable,
        }
        for g in n.gpus:
            out["gpu"][("", g.uuid)] = {
                "node": n.name,
                "pod": (g.pod or "") if g.present else "",
                "present": g.present,
            }
    for p in ctx.live_pods:
        out["pod"][(p.namespace, p.name)] = {
            "phase": p.phase,
            "node": p.node or "",
            "job": p.job,
            "gpus": p.gpus_requested,
        }
    for j in world.jobs.values():
        if j.submit_at <= world.now and j.state != "Waiting":
            out["job"][(j.namespace, j.name)] = {
                "phase": j.state,
                "project": j.project,
                "gpus": j.pods * j.gpus_per_pod,
            }
    for pr in world.projects.values():
        out["project"][("", pr.name)] = {
            "quota": pr.quota_gpus,
            "limit": pr.limit_gpus,
            "namespace": pr.namespace,
        }
    return out


def recorded(cluster, t) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for kind in ("node", "pod", "job", "project", "gpu", "queue"):
        out[kind] = {}
        for v in inventory.as_of(cluster, kind, t):
            key = (v.entity.namespace, v.entity.name)
            if kind == "node":
                out[kind][key] = {
                    "ready": v.ready,
                    "gpus": v.gpus,
                    "gpus_allocatable": v.gpus_allocatable,
                    "unschedulable": v.state["unschedulable"],
                }
            elif kind == "gpu":
                out[kind][key] = {"node": v.node, "pod": v.pod, "present": v.state["present"]}
            elif kind == "pod":
                out[kind][key] = {"phase": v.phase, "node": v.node, "job": v.job, "gpus": v.gpus}
            elif kind == "job":
                out[kind][key] = {"phase": v.phase, "project": v.project, "gpus": v.gpus}
            elif kind == "project":
                out[kind][key] = {
                    "quota": v.state["quota_gpus"],
                    "limit": v.state["limit_gpus"],
                    "namespace": v.state["namespace"],
                }
            else:
                if v.state["project"]:
                    out[kind][("", v.state["project"])] = {
                        "quota": v.state["quota_gpus"],
                        "limit": v.state["limit_gpus"],
                    }
    return out


@pytest.mark.parametrize(
    ("scheduler", "labels"), [("kai", "classic"), ("kueue", "scraped"), ("kai", "current")]
)
def test_it_records_what_the_simulator_serves_at_every_sweep_time(scheduler, labels):
    world = small_world(scheduler, labels)
    truth: dict = {}
    with served(world) as sim:
        cluster = register(sim)
        for minutes in (15, 45, 75, 105):
            t = world.start + timedelta(minutes=minutes)
            sim.advance_to(t)
            truth[t] = expected(world)
            summary = sweep_cluster(cluster.name, t)
            assert summary.errors == [] and summary.skipped_kinds == []
    assert (
        EntityVersion.objects.filter(valid_to__isnull=True).values("entity").count()
        == EntityVersion.objects.filter(valid_to__isnull=True).values("entity").distinct().count()
    )
    for t, want in truth.items():  # history, read back after all sweeps: as of t == the world at t
        got = recorded(cluster, t)
        for kind in ("node", "pod", "job", "project", "gpu"):
            assert got[kind] == want[kind], (t, kind)
        assert got["queue"] == {
            k: {"quota": v["quota"], "limit": v["limit"]} for k, v in want["project"].items()
        }


def test_a_second_sweep_over_an_unchanged_cluster_writes_nothing():
    world = small_world("kai")
    with served(world) as sim:
        cluster = register(sim)
        t = world.start + timedelta(minutes=40)
        sim.advance_to(t)
        first = sweep_cluster(cluster.name, t)
        assert first.opened > 20
        counts = (EntityVersion.objects.count(), Change.objects.count())
        second = sweep_cluster(cluster.name, t + timedelta(seconds=30))
    assert second.opened == 0 and second.changes == 0 and second.errors == []
    assert (EntityVersion.objects.count(), Change.objects.count()) == counts
    assert gc.isenabled()  # the sweep pauses the cyclic collector and gives it back


def test_a_sweep_maps_only_the_pods_whose_resource_version_moved(monkeypatch):
    """The API server bumps an object's resourceVersion at every change: a pod listed again unchanged is not
    mapped again (its mapped state and digest are the last sweep's), a changed one is, and both are right."""
    world = small_world("kai")
    mapped = _counting(monkeypatch, "map_pod")
    with served(world) as sim:
        cluster = register(sim)
        listed = _swept_twice_unchanged(sim, cluster, world, mapped)
        t2 = world.start + timedelta(minutes=75)
        rvs = {p["metadata"]["name"]: p["metadata"]["resourceVersion"] for p in _pods(sim)}
        sim.advance_to(t2)
        moved = {
            p["metadata"]["name"]
            for p in _pods(sim)
            if rvs.get(p["metadata"]["name"]) != p["metadata"]["resourceVersion"]
        }
        want = expected(world)["pod"]
        sweep_cluster(cluster.name, t2)
    assert moved and set(mapped) == moved and len(mapped) < listed
    got = recorded(cluster, t2)["pod"]
    assert got == want


def _counting(monkeypatch, name: str) -> list[str]:
    """The names of the objects ``collectors.mapping.<name>`` maps from now on (the sweep calls it there)."""
    from collectors import mapping

    mapped: list[str] = []
    real = getattr(mapping, name)

    def counting(raw, *args, **kwargs):
        mapped.append(raw["metadata"]["name"])
        return real(raw, *args, **kwargs)

    monkeypatch.setattr(mapping, name, counting)
    return mapped


def _swept_twice_unchanged(sim, cluster, world, mapped: list[str]) -> int:
    """A sweep at 40 min maps objects; one 30 s later, nothing having moved, maps none. How many the first
    mapped (``mapped`` is left empty)."""
    t = world.start + timedelta(minutes=40)
    sim.advance_to(t)
    sweep_cluster(cluster.name, t)
    listed = len(mapped)
    assert listed > 0
    mapped.clear()
    assert sweep_cluster(cluster.name, t + timedelta(seconds=30)).opened == 0
    assert mapped == []  # nothing moved: nothing mapped
    return listed


@contextmanager
def _swept_once(monkeypatch, world, mapper: str):
    """``world`` served and swept at 40 min with the memos empty before; yields (sim, cluster, t, the names
    ``mapping.<mapper>`` maps from then on)."""
    from collectors.sweep import listing_memo

    monkeypatch.setattr(listing_memo, "memos", {})
    with served(world) as sim:
        cluster = register(sim)
        t = world.start + timedelta(minutes=40)
        sim.advance_to(t)
        sweep_cluster(cluster.name, t)
        yield sim, cluster, t, _counting(monkeypatch, mapper)


def _pod_memo() -> dict:
    from collectors.sweep import listing_memo

    (memo,) = [m for key, m in listing_memo.memos.items() if key[0] == "pods"]
    return memo.objects


def test_the_memo_keeps_of_a_recorded_pod_only_what_the_next_sweep_reads(monkeypatch):
    """20,000 pods' whole states must not outlive their recording (they sat beside the job listing: the first
    sweep's peak); once recorded, the memo keeps each pod's digest and the few keys a sweep reads."""
    from collectors.sweep import listing_memo

    world = small_world("kai")
    with _swept_once(monkeypatch, world, "map_pod") as (sim, cluster, t, mapped):
        kept = _pod_memo()
        assert kept and all(obs.partial for _, obs in kept.values())
        allowed = {*listing_memo.REMEMBERED_POD_KEYS, "conditions"}
        assert all(set(obs.state) <= allowed for _, obs in kept.values())
        opened = {
            (ns, name): digest
            for ns, name, digest in EntityVersion.objects.filter(
                cluster=cluster, kind="pod", valid_to__isnull=True
            ).values_list("entity__namespace", "entity__name", "state_hash")
        }
        assert {key: obs.digest for key, (_, obs) in kept.items()} == opened
        mapped.clear()
        again = sweep_cluster(cluster.name, t + timedelta(seconds=30))
        assert (again.opened, again.errors, mapped) == (0, [], [])  # reused, recorded as they were: no write


@pytest.mark.parametrize("scheduler", ["kai", "kueue"])
def test_the_memo_keeps_of_a_recorded_job_its_digest_and_reuses_it_while_it_is_the_open_one(
    monkeypatch, scheduler
):
    from collectors.sweep import listing_memo

    world = small_world(scheduler)
    with _swept_once(monkeypatch, world, "map_job") as (sim, cluster, t, mapped):
        (kept,) = [m.objects for key, m in listing_memo.memos.items() if key[0] == "jobs"]
        assert kept and all(obs.partial and obs.state == {} for _, obs in kept.values())
        jobs = EntityVersion.objects.filter(cluster=cluster, kind="job", valid_to__isnull=True)
        assert {key: obs.digest for key, (_, obs) in kept.items()} == {
            (v.entity.namespace, v.entity.name): v.state_hash for v in jobs.select_related("entity")
        }
        moved = jobs.order_by("pk").first()
        assert moved is not None
        EntityVersion.objects.filter(pk=moved.pk).update(state_hash="written by another")
        mapped.clear()
        again = sweep_cluster(cluster.name, t + timedelta(seconds=30))
        want = expected(world)["job"]
    assert again.errors == [] and mapped == [moved.entity.name]  # the others reused: recorded as they were
    assert recorded(cluster, t + timedelta(seconds=30))["job"] == want


def test_a_pod_whose_recorded_version_changed_since_is_mapped_again(monkeypatch):
    """The memo keeps a recorded pod in part: when its open version is no longer the one recorded (another
    writer, a database put back), the pod is mapped again from its listing, never written from the part."""

    world = small_world("kai")
    with _swept_once(monkeypatch, world, "map_pod") as (sim, cluster, t, mapped):
        pods = EntityVersion.objects.filter(cluster=cluster, kind="pod", valid_to__isnull=True)
        moved = pods.order_by("pk").first()
        assert moved is not None
        EntityVersion.objects.filter(pk=moved.pk).update(state_hash="written by another")
        gone = pods.order_by("-pk").first()
        assert gone is not None and gone.pk != moved.pk
        EntityVersion.objects.filter(pk=gone.pk).delete()  # a database put back to before that pod
        mapped.clear()
        sweep_cluster(cluster.name, t + timedelta(seconds=30))
        want = expected(world)["pod"]
    assert sorted(mapped) == sorted([moved.entity.name, gone.entity.name])
    assert recorded(cluster, t + timedelta(seconds=30))["pod"] == want


def test_recording_a_partial_state_that_is_not_the_open_version_is_refused():
    from collectors.inventory import Observed, PartialState, record_states
    from collectors.models import Cluster

    cluster = Cluster.objects.create(name="c1")
    at = timezone_now()
    whole = Observed("pod", "p-0", {"phase": "Running", "node": "n1", "image": "x"}, namespace="ns")
    record_states(cluster, [whole], at)
    same = inventory.state_hash(whole.state)
    part = Observed("pod", "p-0", {"phase": "Running"}, namespace="ns", digest=same, partial=True)
    assert record_states(cluster, [part], at + timedelta(minutes=1)).opened == 0  # the recorded one: nothing
    other = Observed("pod", "p-0", {"phase": "Failed"}, namespace="ns", digest="elsewhere", partial=True)
    new = Observed("pod", "p-1", {"phase": "Running"}, namespace="ns", digest="never", partial=True)
    with pytest.raises(PartialState, match=r"2 pod\(s\).*ns/p-0, ns/p-1"):
        record_states(cluster, [other, new], at + timedelta(minutes=2), batch=500)
    assert EntityVersion.objects.filter(cluster=cluster).count() == 1  # nothing written


@pytest.mark.parametrize("kind", ["pod", "job"])
def test_a_failed_record_empties_the_memo_and_fails_the_sweep(monkeypatch, kind):
    """The database's failure while a listing is recorded is the sweep's, not the API server's; what the
    memo held may not be recorded, so the next sweep maps everything again."""
    from collectors.sweep import listing_memo, listing_recorder

    monkeypatch.setattr(listing_memo, "memos", {})
    world = small_world("kai")
    real = listing_recorder.record_states

    def failing(cluster, items, *args, **kwargs):
        if items and items[0].kind == kind:
            raise RuntimeError("database went away")
        return real(cluster, items, *args, **kwargs)

    monkeypatch.setattr(listing_recorder, "record_states", failing)
    with served(world) as sim:
        cluster = register(sim)
        t = world.start + timedelta(minutes=40)
        sim.advance_to(t)
        with pytest.raises(RuntimeError, match="went away"):
            sweep_cluster(cluster.name, t)
    memos = {key[0]: m.objects for key, m in listing_memo.memos.items()}
    assert memos[kind + "s"] == {}


def _pods(sim) -> list[dict]:
    import json
    import urllib.request

    req = urllib.request.Request(
        f"{sim.kube_url}/api/v1/pods", headers={"Authorization": f"Bearer {sim.kube_token}"}
    )
    with urllib.request.urlopen(req, context=sim.kube_tls.client_context()) as resp:
        return json.loads(resp.read())["items"]


def test_a_quota_change_is_one_change_on_the_project_with_old_new_and_actor():
    world = small_world("kai")
    with served(world) as sim:
        cluster = register(sim)
        for minutes in (50, 70):  # the scenario cuts vision's quota 16 -> 8 at 1h
            t = world.start + timedelta(minutes=minutes)
            sim.advance_to(t)
            sweep_cluster(cluster.name, t)
    changes = list(
        Change.objects.filter(entity__kind="project", entity__name="vision").exclude(field="created")
    )
    assert [(c.field, c.old, c.new, c.actor, c.source) for c in changes] == [
        ("quota_gpus", 16, 8, "platform-admin", "kai")
    ]
    # dated when the admin wrote the queue (its managedFields say so), not when the 70-minute sweep saw it
    assert changes[0].time == world.start + timedelta(hours=1)


def test_it_keeps_events_past_their_ttl_without_duplicates():
    world = small_world("kai")
    with served(world) as sim:
        cluster = register(sim)
        t = world.start + timedelta(minutes=30)
        sim.advance_to(t)
        first = sweep_events(cluster.name, t)
        again = sweep_events(cluster.name, t)
        sim.advance_to(t + timedelta(hours=2))  # the first events expired from the API server
        sweep_events(cluster.name, world.now)
    assert first.events_new > 0 and again.events_new == 0
    early = KubeEvent.objects.filter(cluster=cluster, last_time__lte=t)
    assert early.count() >= first.events_new  # still here, 2 h later
    assert not KubeEvent.objects.filter(message__contains="abcdefghijklmnop1234").exists()


def test_a_listing_of_events_maps_only_those_not_stored_yet(monkeypatch):
    """Each listing repeats the last hour's Events: only new (uid, count) pairs are mapped and redacted. The
    pairs of the last complete listing are known stored: listed again, they are read undecoded and skipped
    before store_events (no decoding, no lookup); without that memo (another process) they are looked up."""
    from collectors.sweep import events

    world = small_world("kai")
    mapped: list[str] = []
    given: list[int] = []
    map_event, store_events = events.map_event, events.store_events
    monkeypatch.setattr(
        events, "map_event", lambda c, obj, at: mapped.append(obj["metadata"]["uid"]) or map_event(c, obj, at)
    )
    monkeypatch.setattr(
        events, "store_events", lambda c, raw, at: given.append(len(raw)) or store_events(c, raw, at)
    )
    with served(world) as sim:
        cluster = register(sim)
        t = world.start + timedelta(minutes=30)
        sim.advance_to(t)
        first = sweep_events(cluster.name, t)
        assert len(mapped) == first.events_new > 0
        mapped.clear()
        again = sweep_events(cluster.name, t)
        assert again.seen == first.seen >= first.events_new and again.events_new == 0 and mapped == []
        assert given == [first.seen, 0]  # nothing decoded, nothing looked up
        events._listed.clear()
        assert sweep_events(cluster.name, t).events_new == 0 and given[-1] == first.seen and mapped == []
        sim.advance_to(t + timedelta(minutes=20))
        later = sweep_events(cluster.name, world.now)
    assert len(mapped) == later.events_new > 0 and later.events_new <= given[-1] < later.seen


def test_it_stores_five_minute_telemetry_and_marks_absent_counters_as_no_data():
    world = small_world("kai")
    with served(world, disabled_metrics=("DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL")) as sim:
        cluster = register(sim)
        t = world.start + timedelta(minutes=60)
        sim.advance_to(t)
        sweep_cluster(cluster.name, t)
        summary = sweep_telemetry(cluster.name, t)
        again = sweep_telemetry(cluster.name, t)
    assert summary.errors == [] and summary.samples_written > 0 and again.samples_written == 0
    assert set(summary.no_data) == {"DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"}
    assert not TelemetrySample.objects.filter(metric__in=summary.no_data).exists()  # never zero
    note = SourceRun.objects.filter(call="no data DCGM_FI_PROF_SM_ACTIVE").first()  # noted by each sweep
    assert not note.ok and "default counter set" in note.error
    times = sorted(
        set(TelemetrySample.objects.filter(metric="DCGM_FI_DEV_GPU_UTIL").values_list("time", flat=True))
    )
    assert all(x.minute % 5 == 0 and x.second == 0 for x in times) and len(times) == 12
    gpu = EntityVersion.objects.filter(kind="gpu", valid_to__isnull=True).first()
    assert gpu.state["ecc_dbe_total"] is None and "ecc_dbe_total" in gpu.state["unreported"]


def test_the_collector_pass_after_a_sweep_frees_the_cycles_the_sweep_made_without_a_full_pass():
    from collectors.sweep.gc_pause import no_cyclic_gc

    class Node:
        pass

    gc.collect()
    full_passes = gc.get_stats()[2]["collections"]
    with no_cyclic_gc():
        a, b = Node(), Node()
        a.other, b.other = b, a  # a cycle: reference counting alone never frees it
        gone = weakref.ref(a)
        del a, b
        assert gone() is not None  # the collector is off during the sweep
    assert gone() is None
    assert gc.get_stats()[2]["collections"] == full_passes  # only the young generations were walked
    assert gc.isenabled()


def test_telemetry_asked_ahead_stores_what_a_sweep_at_that_moment_stores():
    """The harness sends a telemetry sweep's queries before the inventory sweep and stores the answers after
    (harness.tick): the points are those of a sweep run at that moment, though the world moved on since."""
    from collectors.sweep import ask_telemetry

    world = small_world("kai")
    with served(world) as sim:
        ahead, now = register(sim, "ahead"), register(sim, "now")
        t = world.start + timedelta(minutes=60)
        sim.advance_to(t)
        for cluster in (ahead, now):
            sweep_cluster(cluster.name, t)
        asked = ask_telemetry(ahead.name, t)
        sweep_telemetry(now.name, t)
        sim.advance_to(t + timedelta(minutes=20))  # the world moves on before the answers are stored
        summary = sweep_telemetry(ahead.name, t, asked=asked)

    def points(cluster):
        rows = TelemetrySample.objects.filter(cluster=cluster).values_list(
            "gpu__name", "metric", "time", "value"
        )
        return sorted(rows)

    assert summary.errors == [] and summary.no_data == [] and summary.samples_written > 0
    assert points(ahead) == points(now) and len(points(now)) == summary.samples_written
    assert SourceRun.objects.filter(cluster=ahead, call__startswith="query_range", ok=True).count() == 7


def test_telemetry_asked_ahead_keeps_the_points_another_sweep_stored_meanwhile():
    """Points after the last stored one are copied straight in; a sweep asked before another stored the same
    points (asked outside the lock) finds them and keeps them: no error, no point twice."""
    from collectors.sweep import ask_telemetry

    world = small_world("kai")
    with served(world) as sim:
        cluster = register(sim)
        t = world.start + timedelta(minutes=60)
        sim.advance_to(t)
        sweep_cluster(cluster.name, t)
        asked = ask_telemetry(cluster.name, t)
        first = sweep_telemetry(cluster.name, t)  # stores the same points first
        second = sweep_telemetry(cluster.name, t, asked=asked)
    rows = list(TelemetrySample.objects.filter(cluster=cluster).values_list("gpu_id", "metric", "time"))
    assert first.errors == [] and second.errors == [] and first.samples_written > 0
    assert len(rows) == len(set(rows)) == first.samples_written


@pytest.mark.parametrize("scheduler", ["kai", "kueue"])
def test_a_sweep_maps_only_the_jobs_whose_object_scheduling_or_pods_moved(monkeypatch, scheduler):
    """A job's state follows its object, its PodGroup/Workload and its pods: listed again with all three
    unchanged it is not mapped again (the last sweep's state is kept), and what is recorded stays right."""
    world = small_world(scheduler)
    mapped = _counting(monkeypatch, "map_job")
    with served(world) as sim:
        cluster = register(sim)
        _swept_twice_unchanged(sim, cluster, world, mapped)
        t2 = world.start + timedelta(minutes=75)
        sim.advance_to(t2)
        want = expected(world)["job"]
        sweep_cluster(cluster.name, t2)
    assert 0 < len(mapped) < len(want)  # the jobs that moved, not all of them
    assert recorded(cluster, t2)["job"] == want


@pytest.mark.parametrize(
    ("scheduler", "registered"), [("kai", "kai"), ("kueue", "kueue"), ("kai", "default")]
)
def test_a_sweep_reads_every_listing_ahead_and_records_what_a_live_listing_does(
    monkeypatch, scheduler, registered
):
    """A sweep sends all its listings at its start (``Sweep.listings``, read ahead while it maps and records
    the first ones): none of them is asked again page by page, and what is recorded is what the simulator
    serves, as with live listings (a cluster registered without a scheduler lists no scheduler object)."""
    from collectors.sources.kubernetes import KubeSource

    world = small_world(scheduler)
    live_pages: list[str] = []
    json_page = KubeSource._json

    def counted(self, call, fn, **kw):
        live_pages.append(call)
        return json_page(self, call, fn, **kw)

    with served(world) as sim:
        cluster = register(sim, scheduler=registered)
        t = world.start + timedelta(minutes=45)
        sim.advance_to(t)
        want = expected(world)
        monkeypatch.setattr(KubeSource, "_json", counted)
        summary = sweep_cluster(cluster.name, t)
    assert summary.errors == [] and summary.skipped_kinds == []
    assert live_pages == []
    if registered != scheduler:
        assert not EntityVersion.objects.filter(kind__in=("queue", "project")).exists()
        return
    got = recorded(cluster, t)
    for kind in ("node", "pod", "job", "gpu"):
        assert got[kind] == want[kind], kind


def test_an_inventory_sweep_asked_ahead_records_what_a_sweep_at_that_moment_records():
    """The harness sends an inventory sweep's reads while its inline worker finishes, then sweeps
    (harness.tick): the same rows as a sweep that read then, every listing and query asked once."""
    from collectors.sweep import ask_inventory

    world = small_world("kai")
    with served(world) as sim:
        ahead, now = register(sim, "ahead"), register(sim, "now")
        t = world.start + timedelta(minutes=45)
        sim.advance_to(t)
        asked = ask_inventory(ahead.name, t)
        sweep_cluster(now.name, t)
        summary = sweep_cluster(ahead.name, t, asked=asked)
        unused = ask_inventory(ahead.name, t + timedelta(minutes=1))
        unused.close()  # dropped: nothing recorded, its threads gone
        with pytest.raises(ValueError, match="asked for ahead"):
            sweep_cluster(now.name, t, asked=ask_inventory(ahead.name, t))
    assert summary.errors == [] and summary.skipped_kinds == []
    for kind in ("node", "pod", "job", "project", "gpu", "queue"):
        assert recorded(ahead, t)[kind] == recorded(now, t)[kind], kind
    calls = sorted(SourceRun.objects.filter(cluster=ahead).values_list("call", flat=True))
    assert calls == sorted(SourceRun.objects.filter(cluster=now).values_list("call", flat=True))
    assert len(calls) == len(set(calls))
