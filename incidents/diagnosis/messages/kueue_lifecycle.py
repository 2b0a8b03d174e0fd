"""Kueue's messages about a workload after admission: deactivation, the PodsReady timeout, admission checks.

``incidents.diagnosis.messages.kueue.parse`` asks :func:`lifecycle` first; formats are listed in that module's
docstring (pkg/controller/core/workload_controller.go).
"""

from __future__ import annotations

import re

from incidents.diagnosis.messages import types as t

# The deactivation's own reason names its mechanism.
_REASON_MECHANISMS = {
    "RequeuingLimitExceeded": t.MECH_REQUEUING_LIMIT,
    "MaximumExecutionTimeExceeded": t.MECH_MAX_EXECUTION_TIME,
    "AdmissionCheckRejected": t.MECH_ADMISSION_CHECK_REJECTED,
}
_PODS_READY_TIMEOUT_RE = re.compile(r"Exceeded the PodsReady timeout(?: (?P<wl>[^\s,;]+))?", re.I)
_PODS_NOT_READY_RE = re.compile(r"Not all pods are ready or succeeded", re.I)
_DEACTIVATED_RE = re.compile(
    r"(?:The workload is deactivated|Deactivated)(?: due to (?P<why>.{1,500}))?", re.I
)
_REQUEUING_LIMIT_RE = re.compile(r"exceeding the maximum number of re-queuing retries", re.I)
_MAX_EXEC_RE = re.compile(
    r"exceeding the maximum execution time|The maximum execution time \((?P<secs>\d+)s\) exceeded", re.I
)
_CHECKS_RE = re.compile(
    r"AdmissionChecks? in (?P<state>Rejected|Retry|Pending) state:\s*(?P<checks>.{0,500})|"
    r"Admission check\(s\): \[(?P<old>[^\]]{0,500})\], were rejected|"
    r"The workload has failed admission checks",
    re.I,
)
_CHECK_NAME_RE = re.compile(r'"(?P<name>[^"]{1,253})"')


def lifecycle(s: str, p: t.ParsedMessage, reason: str | None) -> bool:
    """Deactivation, PodsReady timeout and admission-check outcomes: after admission, not quota."""
    dm = _DEACTIVATED_RE.search(s)
    if dm and (dm.group(0).lower().startswith("the workload") or dm["why"]):
        why = dm["why"] or ""
        p.cause = t.CAUSE_DEACTIVATED
        p.mechanism = _deactivation_mechanism(why, reason)
        p.reasons = [t.Reason(code=p.cause, count=None, resource=None, text=dm.group(0)[:500])]
        _check_numbers(s, p)
        p.summary = _deactivated_summary(p, why)
        return True
    mm = _MAX_EXEC_RE.search(s)
    rm = _REQUEUING_LIMIT_RE.search(s)
    if mm or rm:
        # The DeactivationTarget condition's message alone, or the maximum-execution-time event.
        p.cause = t.CAUSE_DEACTIVATED
        p.mechanism = t.MECH_MAX_EXECUTION_TIME if mm else t.MECH_REQUEUING_LIMIT
        hit = mm or rm
        assert hit is not None
        p.reasons = [t.Reason(code=p.cause, count=None, resource=None, text=hit.group(0))]
        if mm and mm["secs"]:
            p.numbers["max_execution_seconds"] = int(mm["secs"])
        p.summary = _deactivated_summary(p, hit.group(0))
        return True
    tm = _PODS_READY_TIMEOUT_RE.search(s)
    if tm:
        p.cause = t.CAUSE_PODS_READY_TIMEOUT
        p.reasons = [t.Reason(code=p.cause, count=None, resource=None, text=tm.group(0))]
        p.summary = (
            "Kueue evicted the admitted workload because its pods did not all become ready within the "
            "WaitForPodsReady timeout; it is requeued with backoff and deactivated once it exceeds its "
            "re-queuing limit. Why the pods were not ready is in the pods' own events."
        )
        return True
    if _PODS_NOT_READY_RE.search(s):
        p.cause = t.CAUSE_WAITING_FOR_PODS_READY
        p.reasons = [t.Reason(code=p.cause, count=None, resource=None, text=s[:500])]
        p.summary = (
            "Kueue admitted the workload and is waiting for all its pods to be ready (WaitForPodsReady)."
        )
        return True
    cm = _CHECKS_RE.search(s)
    if cm:
        p.cause = t.CAUSE_ADMISSION_CHECK
        state = (cm["state"] or ("Rejected" if cm["old"] is not None else "")).lower()
        p.mechanism = {
            "rejected": t.MECH_ADMISSION_CHECK_REJECTED,
            "retry": t.MECH_ADMISSION_CHECK_RETRY,
        }.get(state)
        p.reasons = [t.Reason(code=p.cause, count=None, resource=None, text=cm.group(0)[:500])]
        names = _check_names(cm)
        which = f" ({', '.join(names)})" if names else ""
        verb = {"rejected": "rejected it", "retry": "asked for a retry", "pending": "are pending"}.get(
            state, "failed"
        )
        p.summary = f"Kueue holds the workload: its admission checks{which} {verb}."
        return True
    return False


def _deactivation_mechanism(why: str, reason: str | None) -> str | None:
    if _REQUEUING_LIMIT_RE.search(why):
        return t.MECH_REQUEUING_LIMIT
    if _MAX_EXEC_RE.search(why):
        return t.MECH_MAX_EXECUTION_TIME
    if re.search(r"admission ?check", why, re.I):
        return t.MECH_ADMISSION_CHECK_REJECTED
    return _REASON_MECHANISMS.get(reason or "")


def _check_names(cm: re.Match[str]) -> list[str]:
    if cm["old"] is not None:
        return [n.strip() for n in cm["old"].split() if n.strip()]
    return [m["name"] for m in _CHECK_NAME_RE.finditer(cm["checks"] or "")][:8]


def _check_numbers(s: str, p: t.ParsedMessage) -> None:
    cm = _CHECKS_RE.search(s)
    if cm is not None:
        names = _check_names(cm)
        if names:
            p.numbers["admission_checks"] = len(names)


_DEACTIVATION_WORDS = {
    t.MECH_REQUEUING_LIMIT: "it was evicted and requeued more times than its re-queuing limit allows "
    "(WaitForPodsReady requeuingStrategy.backoffLimitCount)",
    t.MECH_MAX_EXECUTION_TIME: "it ran longer than its maximum execution time",
    t.MECH_ADMISSION_CHECK_REJECTED: "an admission check rejected it",
}


def _deactivated_summary(p: t.ParsedMessage, why: str) -> str:
    because = _DEACTIVATION_WORDS.get(p.mechanism or "")
    if because is None:
        because = f"due to {why.strip()}" if why.strip() else "spec.active was set to false"
    secs = p.numbers.get("max_execution_seconds")
    limit = f" ({t.fmt_number(secs)} s)" if secs is not None else ""
    return (
        f"Kueue deactivated the workload{limit}: {because}. It will not be admitted again until "
        "someone sets spec.active back to true."
    )
