"""MIG profiles as schedulers count them: one module for the inventory, the diagnosis and the pages."""

from __future__ import annotations


def mig_units(profile: str) -> int:
    """What one MIG instance counts in a KAI queue: the "<n>g" of its profile ("3g.40gb" counts 3)."""
    head = profile.split("g.", 1)[0]
    return int(head) if head.isdigit() else 1
