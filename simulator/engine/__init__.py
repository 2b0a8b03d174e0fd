"""The simulation engine: ``World`` and the scheduler, lifecycle and event machinery behind it."""

from __future__ import annotations

from .scheduler import order_key
from .world import World

__all__ = ["World", "order_key"]
