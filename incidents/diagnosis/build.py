"""The one way the checks build a refuted finding: the statement, what refutes it, and why."""

from __future__ import annotations

from typing import Any

from incidents.diagnosis.types import REFUTED, Cite, Finding, Ref


def refuted(
    code: str,
    statement: str,
    confidence: float,
    refutes: list[Cite],
    subject: Ref | None,
    sources: tuple[str, ...],
    why: str,
    facts: dict[str, Any] | None = None,
) -> Finding:
    """A finding the evidence rules out: what rules it out, why in words, and the facts rank may still use."""
    return Finding(
        code,
        statement,
        REFUTED,
        confidence,
        refutes=refutes,
        subject=subject,
        sources=sources,
        why=why,
        facts=facts or {},
    )
