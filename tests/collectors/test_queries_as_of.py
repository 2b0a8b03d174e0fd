"""As-of lists read each entity's name by primary key, never by joining the entity table.

PostgreSQL misestimates the as-of filter by an order of magnitude and then hashes the whole entity table
(which grows with history; bench/asof.py). These pin the tuned store's reads (collectors.storage), on both
backends.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from collectors import queries
from collectors.models import Cluster
from tests.collectors.factories import T0, build_small_cluster

pytestmark = pytest.mark.django_db


@pytest.fixture
def small():
    return build_small_cluster(Cluster.objects.create(name="gpu-a"))


def test_node_members_come_without_a_join_and_with_their_entities(small):
    c, t = small.cluster, T0 + timedelta(minutes=30)
    with CaptureQueriesContext(connection) as ctx:
        gpus, pods = queries.gpus_and_pods_on_node(c, "h100-01", t)
        alone = queries.pods_on_node(c, "h100-01", t)
    assert len(ctx.captured_queries) == 2
    assert all("JOIN" not in q["sql"].upper() for q in ctx.captured_queries), ctx.captured_queries[0]["sql"]
    assert (
        [p.entity.name for p in pods] == [p.entity.name for p in alone] == sorted(p.entity.name for p in pods)
    )
    assert len(gpus) == 8 and [g.state["index"] for g in gpus] == list(range(8))
    pod = pods[0]
    assert pod.entity.namespace == "vision" and pod.entity.kind == "pod" and pod.entity.cluster == c
    assert pod.entity.get_absolute_url().startswith(f"/c/{c.name}/pods/vision/")
    real = small.entity("pod", pod.entity.name, "vision")
    assert pod.entity.pk == real.pk
    with CaptureQueriesContext(connection) as ctx:
        assert pod.entity.uid == real.uid and pod.entity.first_seen == real.first_seen  # loaded on access
    assert len(ctx.captured_queries) >= 1


def test_pods_of_a_job_are_in_name_order(small):
    c, t = small.cluster, T0 + timedelta(minutes=30)
    pods = queries.pods_of_job(c, "vision", "resnet-train", t)
    assert [p.entity.name for p in pods] == ["resnet-train-0", "resnet-train-1"]
