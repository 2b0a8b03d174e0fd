"""The incident answer of a waiting job links where it stands in line (its why-pending panel) and the what-if
page (issue 44 item 1), with the cursor."""

from __future__ import annotations

from incidents.models import Hypothesis
from tests.incidents.test_incident_detail import IncidentPageTestCase


class IncidentPositionLinkTests(IncidentPageTestCase):
    def test_a_scheduling_answer_links_the_jobs_place_in_line_and_the_what_if_page(self) -> None:
        self.client.force_login(self.alice)
        Hypothesis.objects.create(
            incident=self.incident,
            code="gpu_capacity_shortage",
            status="supported",
            confidence=0.6,
            statement="No node has 8 free GPUs",
        )
        html = self.client.get(self.url).content.decode()
        assert "Where vision/resnet-train stands in line</a>" in html
        assert '<a href="/c/gpu-prod/jobs/vision/resnet-train/why/?t=' in html
        assert '<a href="/c/gpu-prod/whatif/?t=' in html

    def test_a_workload_answer_does_not(self) -> None:
        self.client.force_login(self.alice)
        Hypothesis.objects.create(
            incident=self.incident, code="oom_killed", status="supported", confidence=0.9, statement="OOM"
        )
        assert "stands in line" not in self.client.get(self.url).content.decode()
