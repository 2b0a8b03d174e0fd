"""Entity pages cost a fixed number of queries: not more for a node with 500 pods, nor for 50 versions each.

docs/design.md §10: query-count budgets are tests. Each page is measured on the small story, then again after
every entity got 50 more versions and one node got ~500 pods (each with its own job in queue nlp).
"""

from __future__ import annotations

from datetime import timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext

from collectors.models import EntityVersion
from incidents.models import DiagnosisRun, Incident, IncidentSubject
from tests.collectors.factories import PageTestCase, crowd_node, deepen_history, gpu_uuid, iso

# Budget per page: session + user (2), entity with its version at t and the collection errors (1), the page's
# own related queries, changes with previous/next (1), the incidents about it at t (1, web.inventory.incidents_about). A
# failing budget names the queries it ran.
BUDGETS = {
    "/c/gpu-prod/nodes/h100-01/": 6,  # + its GPUs and pods (one query)
    f"/c/gpu-prod/gpus/{gpu_uuid('h100-01', 0)}/": 7,  # + users in window, related ids
    "/c/gpu-prod/pods/vision/resnet-train-0/": 9,  # + GPUs, events, versions up to t, related ids
    "/c/gpu-prod/jobs/vision/resnet-train/": 9,  # + pods, events, request history, related ids
    "/c/gpu-prod/jobs/nlp/bert-eval/": 10,  # + its queue's waiting jobs (position); why-pending loads lazily
    "/c/gpu-prod/queues/nlp/": 10,  # + usage, jobs, their pods' trouble, policy changes, related ids
    "/c/gpu-prod/projects/nlp/": 10,
    "/c/gpu-prod/jobs/?queue=nlp": 5,  # session, user, cluster, count, rows
    "/c/gpu-prod/jobs/?node=h100-01&phase=Running": 5,
}


def about_every_page(story, t, n: int) -> None:  # type: ignore[no-untyped-def]
    """``n`` open incidents, each diagnosed, naming every object the budgeted pages show."""
    entities = [
        story.entity("node", "h100-01"),
        story.entity("gpu", gpu_uuid("h100-01", 0)),
        story.entity("pod", "resnet-train-0", "vision"),
        story.entity("job", "resnet-train", "vision"),
        story.entity("job", "bert-eval", "nlp"),
        story.entity("queue", "nlp"),
        story.entity("project", "nlp"),
    ]
    for i in range(n):
        inc = Incident.objects.create(
            title=f"incident {i}",
            cluster=story.cluster,
            onset=t - timedelta(minutes=5),
            window_start=t - timedelta(hours=1),
        )
        IncidentSubject.objects.bulk_create(
            [
                IncidentSubject(incident=inc, entity=e, role="subject" if i % 2 else "related")
                for e in entities
            ]
        )
        DiagnosisRun.objects.create(
            incident=inc, at=inc.onset, made_at=inc.onset, top_code="gpu_capacity_shortage"
        )


class QueryBudgetTest(PageTestCase):
    def count(self, path: str, t) -> tuple[int, list[str]]:
        sep = "&" if "?" in path else "?"
        with CaptureQueriesContext(connection) as ctx:
            r = self.client.get(f"{path}{sep}t={iso(t)}&w=2h")
        assert r.status_code == 200, (path, r.status_code)
        return len(ctx.captured_queries), [q["sql"][:160] for q in ctx.captured_queries]

    def test_it_keeps_every_entity_page_within_budget_and_flat_as_data_grows(self):
        small_t = self.times["end"]
        small = {path: self.count(path, small_t) for path in BUDGETS}

        deepen_history(self.cluster, small_t + timedelta(minutes=1), versions=50, step=timedelta(seconds=10))
        big_t = small_t + timedelta(minutes=20)
        crowd_node(self.cluster, "h100-01", 498, big_t - timedelta(minutes=1))
        node_pods = EntityVersion.objects.as_of(big_t).filter(kind="pod", node="h100-01").count()
        assert node_pods == 499
        node = self.story.entity("node", "h100-01")
        assert node.versions.count() >= 51
        about_every_page(self.story, big_t, 20)  # and 20 incidents about each object, diagnosed
        big = {path: self.count(path, big_t) for path in BUDGETS}

        for path, budget in BUDGETS.items():
            n_small, sql_small = small[path]
            n_big, sql_big = big[path]
            assert n_small <= budget, (path, n_small, sql_small)
            assert n_big == n_small, (path, n_small, n_big, sql_big)

    def test_it_renders_the_crowded_node_page_with_all_its_pods(self):
        at = self.times["end"]
        crowd_node(self.cluster, "h100-02", 200, at)
        r = self.client.get(f"/c/gpu-prod/nodes/h100-02/?t={iso(at + timedelta(minutes=1))}")
        assert len(r.context["pods"]) == 201
        assert "Pods on this node (201)" in r.content.decode()
