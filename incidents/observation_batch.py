"""The observations one evidence collection gathers, redacted as they are added (the last one for a key wins)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from collectors.models import Entity
from collectors.sources.redact import redact_text, redact_value
from incidents.models import Incident, Observation


@dataclass
class Batch:
    """Observations of one collection run, keyed by dedup_key (the last one for a key wins)."""

    incident: Incident
    collected_at: datetime
    items: dict[str, Observation] = field(default_factory=dict)

    def add(
        self,
        *,
        kind: str,
        source: str,
        locator: str,
        observed_at: datetime,
        content: dict,
        key: str,
        entity: Entity | None = None,
        summary: str = "",
        error: str = "",
    ) -> None:
        self.items[key] = Observation(
            incident=self.incident,
            entity=entity,
            source=source,
            kind=kind,
            locator=redact_text(locator[:1000]),
            observed_at=observed_at,
            collected_at=self.collected_at,
            content=_redacted(content),
            summary=redact_text(summary[:500]),
            error=redact_text(error),
            dedup_key=key[:300],
        )


def _redacted(content: dict) -> dict:
    """``content`` redacted, except a series' points: [timestamp we formatted, float] pairs hold no text to mask,
    and walking hundreds of them per series cost more than the rest of the collection."""
    points = content.get("points")
    if isinstance(points, list) and all(
        isinstance(p, list | tuple) and len(p) == 2 and isinstance(p[1], int | float) for p in points
    ):
        out = redact_value({k: v for k, v in content.items() if k != "points"})
        out["points"] = [[str(t), v] for t, v in points]
        return out
    return redact_value(content)
