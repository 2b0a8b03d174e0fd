"""A job version's typed priority and submission columns are written with the version (positions and waiting
lists come from the scheduling model's order: tests/collectors/test_waiting_order.py)."""

from __future__ import annotations

from django.test import TestCase

from collectors import inventory
from collectors.models import Cluster, EntityVersion
from tests.collectors.factories import T0, job_obs


class TypedColumnsTest(TestCase):
    def test_the_typed_columns_are_written_with_the_version(self):
        cluster = Cluster.objects.create(name="q")
        o = job_obs("ns", "j", queue="a", phase="Pending", pods=1, gpus_per_pod=1, submitted=T0,
                    priority_class="build")  # fmt: skip
        inventory.record_states(cluster, [o], T0)
        v = EntityVersion.objects.get(cluster=cluster, kind="job")
        assert (v.priority, v.submitted) == (100, T0)
