"""Status transitions and owner changes: allowed moves only, each audited with who, when, from and to."""

from __future__ import annotations

from incidents.models import AuditEntry, Incident
from incidents.services import TransitionError, acknowledge, allowed_transitions, assign_owner, set_status
from tests.base import T0, BaseTestCase


class ServicesTests(BaseTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.incident = Incident.objects.create(title="x", onset=T0, window_start=T0, cluster=self.cluster)

    def test_it_walks_open_investigating_mitigated_resolved_and_audits_each_step(self) -> None:
        for status in ("investigating", "mitigated", "resolved"):
            set_status(self.incident, status, self.alice, request_id="r-1")
        self.incident.refresh_from_db()
        self.assertEqual(self.incident.status, "resolved")
        self.assertIsNotNone(self.incident.resolved_at)
        self.assertIsNotNone(self.incident.window_end)
        entries = list(
            AuditEntry.objects.order_by("id").values_list(
                "user_name", "action", "before", "after", "request_id"
            )
        )
        self.assertEqual(
            entries,
            [
                ("alice", "incident.status", {"status": "open"}, {"status": "investigating"}, "r-1"),
                ("alice", "incident.status", {"status": "investigating"}, {"status": "mitigated"}, "r-1"),
                ("alice", "incident.status", {"status": "mitigated"}, {"status": "resolved"}, "r-1"),
            ],
        )

    def test_it_reopens_a_resolved_incident_and_opens_its_window_again(self) -> None:
        set_status(self.incident, "resolved", self.alice)
        set_status(self.incident, "open", self.alice)
        self.incident.refresh_from_db()
        self.assertEqual(
            (self.incident.status, self.incident.resolved_at, self.incident.window_end), ("open", None, None)
        )

    def test_it_refuses_a_move_the_lifecycle_does_not_allow_and_writes_nothing(self) -> None:
        with self.assertRaisesMessage(TransitionError, "from open to 'open'"):
            set_status(self.incident, "open", self.alice)
        with self.assertRaisesMessage(TransitionError, "allowed"):
            set_status(self.incident, "bogus", self.alice)
        self.assertEqual(AuditEntry.objects.count(), 0)

    def test_it_lists_the_allowed_moves(self) -> None:
        self.assertEqual(
            allowed_transitions("open"), ["acknowledged", "investigating", "mitigated", "resolved"]
        )
        self.assertEqual(
            allowed_transitions("acknowledged"), ["investigating", "mitigated", "resolved", "open"]
        )
        self.assertEqual(allowed_transitions("mitigated"), ["investigating", "resolved", "open"])
        self.assertEqual(allowed_transitions("resolved"), ["open"])

    def test_it_assigns_an_owner_once_and_audits_it(self) -> None:
        assign_owner(self.incident, "bob", self.alice)
        assign_owner(self.incident, "bob", self.alice)  # no change, no entry
        self.assertEqual(Incident.objects.get().owner, "bob")
        self.assertEqual(
            list(AuditEntry.objects.values_list("action", "after")), [("incident.owner", {"owner": "bob"})]
        )

    def test_it_acknowledges_by_taking_ownership(self) -> None:
        acknowledge(self.incident, self.alice)
        self.incident.refresh_from_db()
        self.assertEqual((self.incident.owner, self.incident.status), ("alice", "acknowledged"))
        self.assertEqual(AuditEntry.objects.count(), 2)

    def test_it_records_system_actions_without_a_user(self) -> None:
        set_status(self.incident, "resolved", None)
        self.assertEqual(AuditEntry.objects.get().user_name, "system")
