"""Template filters writing GPU amounts the one way ``web.gpu_amounts`` does: shares, memory, MIG.

``{% load gpu_amounts %}`` then ``{{ job.state|gpu_request }}`` ("0.5 of a GPU", "2 × 1g.10gb", "8 GPUs"),
``{{ slice.memory_mib|gib }}`` ("22.5 GiB"), ``{{ units|gpu_amount }}`` ("0.5", "3").
"""

from __future__ import annotations

from typing import Any

from django import template

from web import gpu_amounts

register = template.Library()


@register.filter
def gpu_request(state: dict[str, Any] | None) -> str:
    """What one pod of a pod's or job's state asks, in words (no product known here: "of a GPU")."""
    return gpu_amounts.state_request_words(state)


@register.filter
def gib(mib: float | int | None) -> str:
    return gpu_amounts.gib(mib)


@register.filter
def gpu_amount(x: float | int | None) -> str:
    return gpu_amounts.amount(x)


@register.filter
def mig_request(mig: dict[str, int] | None) -> str:
    return gpu_amounts.mig_words(mig)


@register.filter
def job_request(state: dict[str, Any] | None) -> str:
    """A job's request in one cell: "0.5 of a GPU", "2 × 1g.10gb", "16 GPUs"."""
    return gpu_amounts.job_words(state)


@register.filter
def gpu_units(state: dict[str, Any] | None) -> str:
    """The GPUs a pod or job counts in its queue ("0.5", "3"), "?" when not known yet."""
    units = gpu_amounts.units_of(state)
    return "?" if units is None else gpu_amounts.amount(units)


@register.filter
def is_fractional(state: dict[str, Any] | None) -> bool:
    return gpu_amounts.is_fractional(state)


@register.filter
def per_pod(state: dict[str, Any] | None) -> str:
    """What one pod asks, shortest ("8 GPUs", "0.5 of a GPU", "1g.10gb")."""
    return gpu_amounts.per_pod_words(state)


@register.filter
def job_note(state: dict[str, Any] | None) -> str:
    """Beside a job's GPU units in a list: "share", "20 GiB share", "2 × 1g.10gb"; "" for whole GPUs."""
    return gpu_amounts.job_note(state)
