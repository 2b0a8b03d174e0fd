"""A scheduler's condition as one readable line, for the console's rows."""

from __future__ import annotations

import re

_WS = re.compile(r"\s+")
# KAI's fit errors wrap the reason: "Resources were not found for pod ns/x due to: no nodes with enough resources".
_KAI_WRAPPER = re.compile(r"Resources were not found for pod(?: group)? \S+? due to: ", re.I)


def one_line(reason: str, message: str, limit: int = 140) -> str:
    """A scheduler condition as one readable line: the reason, then the message's first sentence.

    Scheduler messages run to several hundred characters ("0/60 nodes are available: 12 Insufficient
    nvidia.com/gpu, … preemption: …"); the console row needs the gist, the job page has the rest.
    """
    msg = _KAI_WRAPPER.sub("", _WS.sub(" ", message or "").strip())
    head = msg.split(". ", 1)[0] if msg else ""
    if "preemption:" in head:
        head = head.split("preemption:", 1)[0].rstrip(" .")
    if reason and head.lower().startswith(reason.lower()):
        head = head[len(reason) :].lstrip(" :")  # "OverLimit: OverLimit: …" -> "OverLimit: …"
    text = f"{reason}: {head}" if reason and head else (reason or head or "no reason reported")
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
