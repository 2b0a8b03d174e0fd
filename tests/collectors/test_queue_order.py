"""A pending job's queue position (SQL over the pending-jobs index) agrees with the queue's order (Python), for
any mix of numeric priorities, PriorityClasses, submission times (some missing or unreadable) and ties."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.django import TestCase as HypothesisTestCase

from collectors import inventory, queue_position
from collectors.models import Cluster, EntityVersion
from tests.collectors.factories import T0, job_obs

job = st.tuples(
    st.sampled_from([None, 10, 100, 200]),  # state.priority (None: from the PriorityClass)
    st.sampled_from(["train", "build", "inference", "unknown-class"]),
    st.sampled_from([0, 1, 5, None, "garbage"]),  # submission minute; None: absent; "garbage": unreadable
)


class QueuePositionTest(HypothesisTestCase):
    @settings(max_examples=25, deadline=None)
    @given(jobs=st.lists(job, min_size=1, max_size=8))
    def test_position_in_sql_equals_the_index_in_queue_order(self, jobs):
        cluster = Cluster.objects.create(name="q")
        obs = []
        for i, (priority, klass, minute) in enumerate(jobs):
            o = job_obs("ns", f"j{i}", queue="a", phase="Pending", pods=1, gpus_per_pod=1, submitted=T0,
                        priority_class=klass)  # fmt: skip
            state = dict(o.state)
            if priority is not None:
                state["priority"] = priority
            if minute is None:
                del state["submitted"]
            elif minute == "garbage":
                state["submitted"] = "yesterday"
            else:
                state["submitted"] = (T0 + timedelta(minutes=minute)).strftime("%Y-%m-%dT%H:%M:%SZ")
            obs.append(replace(o, state=state))
        t = T0 + timedelta(hours=1)
        inventory.record_states(cluster, obs, T0)
        versions = list(EntityVersion.objects.filter(cluster=cluster, kind="job"))
        ordered = queue_position.queue_order(versions)
        for v in versions:
            assert queue_position.queue_position(cluster, v, t) == (ordered.index(v) + 1, len(versions)), jobs

    def test_the_typed_columns_are_written_with_the_version(self):
        cluster = Cluster.objects.create(name="q")
        o = job_obs("ns", "j", queue="a", phase="Pending", pods=1, gpus_per_pod=1, submitted=T0,
                    priority_class="build")  # fmt: skip
        inventory.record_states(cluster, [o], T0)
        v = EntityVersion.objects.get(cluster=cluster, kind="job")
        assert (v.priority, v.submitted) == (100, T0)
