"""One queue order: every position and waiting list comes from the scheduling model's order.

The job page's "position N of M waiting in this queue", the queue and project pages' waiting lists and the job
list of waiting jobs give each job the place the why-pending panel (and so the incidents) give it: the model's
order within its queue (``queue_order.in_queue_key``) and across queues (the cluster's scheduling pass:
KAI departments, queue priority, fair share), never a second ranking of priority then submission.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from collectors import inventory
from tests.collectors.factories import T0, PageTestCase, job_obs


def waiting(ns: str, name: str, *, queue: str, submitted, klass: str = "train", gpus: int = 1):  # type: ignore[no-untyped-def]
    return job_obs(
        ns,
        name,
        queue=queue,
        phase="Pending",
        pods=1,
        gpus_per_pod=gpus,
        submitted=submitted,
        priority_class=klass,
    )


class WaitingOrderTest(PageTestCase):
    def why_position(self, ns: str, name: str, at):  # type: ignore[no-untyped-def]
        r = self.get(f"/c/gpu-prod/jobs/{ns}/{name}/why/", at)
        pos = r.context["why_pending"].position
        assert pos is not None, (ns, name)
        return pos

    def test_a_queues_list_and_each_job_page_give_the_position_the_why_panel_gives(self):
        at = self.times["end"]
        no_time = waiting("nlp", "no-time", queue="nlp", submitted=at)
        state = dict(no_time.state)
        del state["submitted"]  # a job whose submission time the collector could not read
        inventory.record_states(
            self.cluster,
            [
                # a PriorityClass the model counts as train (its value unknown), submitted before everyone
                waiting("nlp", "research-x", queue="nlp", submitted=T0, klass="research"),
                waiting("nlp", "late-build", queue="nlp", submitted=at, klass="build"),
                replace(no_time, state=state),
            ],
            at,
        )
        t = at + timedelta(minutes=1)
        listed = [j.entity.name for j in self.get("/c/gpu-prod/queues/nlp/", t).context["pending"]]
        by_model = sorted(listed, key=lambda n: self.why_position("nlp", n, t).in_queue)
        assert listed == by_model
        assert listed == ["late-build", "no-time", "research-x", "bert-eval"]
        for pos, name in enumerate(listed, start=1):
            why = self.why_position("nlp", name, t)
            page = self.get(f"/c/gpu-prod/jobs/nlp/{name}/", t)
            assert page.context["queue_position"] == (why.in_queue, why.queue_size) == (pos, 4), name
            assert f"position {pos} of 4 waiting in this queue" in page.content.decode()
        project = self.get("/c/gpu-prod/projects/nlp/", t)
        assert [j.entity.name for j in project.context["pending"]] == listed

    def test_the_list_of_waiting_jobs_across_queues_is_the_clusters_order(self):
        at = self.times["end"]
        # nlp's jobs were submitted first; vision's queue priority (50 over 40) serves vit-large first
        inventory.record_states(
            self.cluster,
            [waiting("nlp", "nlp-early", queue="nlp", submitted=T0, gpus=8)],
            at,
        )
        t = at + timedelta(minutes=1)
        r = self.get("/c/gpu-prod/jobs/?phase=Pending", t)
        listed = [(v.entity.namespace, v.entity.name) for v in r.context["versions"]]
        in_cluster = {job: self.why_position(*job, t).in_cluster for job in listed}
        assert [in_cluster[job] for job in listed] == sorted(in_cluster.values()), in_cluster
        assert listed[0] == ("vision", "vit-large")
        assert "ordered by the cluster&#x27;s scheduling order (KAI:" in r.content.decode()
        # one queue's waiting jobs: its own order, the why panel's place in the queue
        r = self.get("/c/gpu-prod/jobs/?phase=Pending&queue=nlp", t)
        assert [v.entity.name for v in r.context["versions"]] == ["nlp-early", "bert-eval"]

    def test_each_waiting_jobs_place_in_the_list_is_its_jobs_ahead_plus_one(self):
        """The job list's rank, the why panel's position and its "Ahead in the queue" list (the incident's count)
        are one number: the jobs ahead of a job in the cluster's order (ahead.jobs_ahead)."""
        at = self.times["end"]
        inventory.record_states(
            self.cluster,
            [
                waiting("nlp", "nlp-big", queue="nlp", submitted=T0, gpus=8),
                waiting("nlp", "nlp-small", queue="nlp", submitted=T0 + timedelta(minutes=1)),
                waiting("vision", "vision-small", queue="vision", submitted=T0 + timedelta(minutes=2)),
            ],
            at,
        )
        t = at + timedelta(minutes=1)
        r = self.get("/c/gpu-prod/jobs/?phase=Pending", t)
        listed = [(v.entity.namespace, v.entity.name) for v in r.context["versions"]]
        assert len(listed) >= 4
        for rank, (ns, name) in enumerate(listed, start=1):
            why = self.get(f"/c/gpu-prod/jobs/{ns}/{name}/why/", t).context["why_pending"]
            assert why.position is not None and why.position.in_cluster == rank, (name, rank)
            assert len(why.ahead) == why.ahead_count == rank - 1, (name, [a.job.name for a in why.ahead])
            assert [(a.job.namespace, a.job.name) for a in why.ahead] == listed[: rank - 1]
