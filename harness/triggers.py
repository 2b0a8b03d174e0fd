"""Which alerts ask for an inventory sweep, and what the driver remembers to tell (``Policy.once_per_alert``,
``Policy.held_pending``)."""

from __future__ import annotations

from typing import Any

from harness.policy import Policy


class AlertTriggers:
    """The alerts of one run as the sweeps saw them: an alert starting to fire asks for a sweep, and so does one
    pending through a whole tick without a sweep having seen it pending (``Policy.held_pending``).

    One that stops asks for none: the next sweep dates its subject's recovery by the objects' own times (a GPU,
    which has none, when it sees it), and the incident's quiet period starts then (incidents.lifecycle).
    """

    def __init__(self) -> None:
        self.notified: set[str] = set()  # swept for, in this run
        self.at_last_sweep: set[str] = set()  # firing (or held) at the last inventory sweep
        self.held: set[str] = set()  # pending at the previous tick
        self.pending_swept: set[str] = set()  # pending now, and already so at an inventory sweep
        self.due_keys: set[str] = set()  # asking for a sweep at this tick

    def due(self, world: Any, policy: Policy, last: dict[str, float], clock: float) -> bool:
        """Whether the alerts of ``world`` now ask for a sweep; ``last``: each sweep kind's last ``clock``."""
        firing, pending = self._listed(world, policy)
        # A condition pending through a tick needs one sweep while it pends, not one of its own: a sweep since
        # it started pending (for another alert, or the idle cadence) already saw its first states.
        self.pending_swept &= pending
        held = (pending & self.held) - self.pending_swept
        due = firing | held if policy.held_pending else firing
        self.held = pending
        self.due_keys = due
        started = due - (self.notified if policy.once_per_alert else self.at_last_sweep)
        if policy.once_per_alert:
            self.notified |= due
        gap_ok = "inventory" not in last or clock - last["inventory"] >= policy.firing_gap.total_seconds()
        return bool(started) and gap_ok

    def swept(self) -> None:
        """An inventory sweep ran: it saw what asks now, and what pends now in its pending state."""
        self.at_last_sweep = self.due_keys
        self.pending_swept |= self.held

    @staticmethod
    def _listed(world: Any, policy: Policy) -> tuple[set[str], set[str]]:
        """The keys (``Policy.alert_key``) of the alerts firing and of those pending."""
        firing: set[str] = set()
        pending: set[str] = set()
        for a in world.alerts(include_pending=True):
            status = a.get("status")
            if policy.alert_key == "state":
                key, up = f"{a['fingerprint']}:{status}", status == "firing"
            else:
                key, up = str(a["fingerprint"]), status != "pending"
            if up:
                firing.add(key)
            elif status == "pending":
                pending.add(key)
        return firing, pending
