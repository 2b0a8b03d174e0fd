"""Read scheduler messages: kube-scheduler, Kueue, KAI Scheduler (Run:ai), Volcano,
HAMi and the cluster autoscaler.

`parse_message(text, reason=None)` detects which scheduler wrote the text and
returns a `ParsedMessage`. Unrecognised text is `source="unknown"` with no
reasons: a parse reports what the message says, never a guess.

A parse is one piece of evidence. Diagnosis (docs/design.md §8) still checks the
per-node fit and the queue state at t from inventory before it claims a cause.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from incidents.diagnosis.messages import autoscaler, hami, kai, kube_scheduler, kueue, volcano
from incidents.diagnosis.messages.types import (
    CAUSES,
    NODE_REASON_CODES,
    SOURCE_CLUSTER_AUTOSCALER,
    SOURCE_HAMI,
    SOURCE_KAI,
    SOURCE_KUBE_SCHEDULER,
    SOURCE_KUEUE,
    SOURCE_UNKNOWN,
    SOURCE_VOLCANO,
    ParsedMessage,
    Preemption,
    Reason,
)

logger = logging.getLogger(__name__)

# Longer texts are cut before parsing: Kubernetes events are capped at 1 KiB and
# conditions at 32 KiB, and a KAI per-node detail list is not worth more.
MAX_TEXT = 16_000

UNKNOWN_SUMMARY = "Not a scheduler message rcaweb recognises; nothing was inferred from it."


Parser = Callable[[str, "str | None"], "ParsedMessage | None"]


def _own(parse: Callable[[str], ParsedMessage | None]) -> Parser:
    """A parser that reads the text alone (the reason hint is Kueue's and KAI's)."""
    return lambda text, _reason: parse(text)


def unknown(text: str = "", summary: str = UNKNOWN_SUMMARY) -> ParsedMessage:
    return ParsedMessage(source=SOURCE_UNKNOWN, summary=summary, text=text)


def parse_message(text: str, reason: str | None = None) -> ParsedMessage:
    """Parse one scheduler message; `reason` is the condition/event reason when known.

    The reason (e.g. Kueue `ExceedsMaxQuota`, KAI `NonPreemptibleOverQuota`)
    only breaks ties and fills the cause when the text alone does not say; it
    never turns unrelated text into a finding.
    """
    if not isinstance(text, str) or not text.strip():
        return unknown("" if not isinstance(text, str) else text)
    text = text[:MAX_TEXT]
    reason = reason.strip() if isinstance(reason, str) and reason.strip() else None
    try:
        return _parse(text, reason)
    except Exception:  # a parser bug must not break an incident page; the text stays visible
        logger.exception("scheduler message parser failed")
        return unknown(
            text, "rcaweb could not parse this message (parser error); nothing was inferred from it."
        )


def _parse(text: str, reason: str | None) -> ParsedMessage:
    # Headers only one component writes go first; KAI and Kueue recognise their
    # texts by markers, kube-scheduler by its "0/N nodes are available" header,
    # which KAI also uses (so KAI is tried before it).
    order: list[Parser] = [_own(autoscaler.parse), _own(volcano.parse), kai.parse, kueue.parse]
    if reason in kueue.DETECTING_REASONS:
        order = [kueue.parse, _own(autoscaler.parse), _own(volcano.parse), kai.parse]
    if kube_scheduler.has_legacy_header(text):
        order.insert(0, _own(kube_scheduler.parse))
    order += [_own(kube_scheduler.parse), _own(hami.parse)]
    for parser in order:
        parsed = parser(text, reason)
        if parsed is not None:
            return parsed
    bare = kube_scheduler.parse_bare(text)
    if bare is not None:
        return bare
    return unknown(text)


__all__ = [
    "CAUSES",
    "MAX_TEXT",
    "NODE_REASON_CODES",
    "SOURCE_CLUSTER_AUTOSCALER",
    "SOURCE_HAMI",
    "SOURCE_KAI",
    "SOURCE_KUBE_SCHEDULER",
    "SOURCE_KUEUE",
    "SOURCE_UNKNOWN",
    "SOURCE_VOLCANO",
    "ParsedMessage",
    "Preemption",
    "Reason",
    "parse_message",
]
