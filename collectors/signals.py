"""Signals the collectors send; receivers live in other apps (collectors knows nothing of incidents).

``inventory_swept`` is sent after a sweep of one cluster's inventory has been saved, with ``cluster`` (the
cluster's name) and ``at`` (the moment the sweep describes: the wall clock live, the simulated clock in the
scenario and demo drivers). The incidents app uses it to re-diagnose firing incidents whose subjects changed.
A receiver that raises is logged by the sender and never fails the sweep.
"""

from __future__ import annotations

from django.dispatch import Signal

inventory_swept = Signal()
