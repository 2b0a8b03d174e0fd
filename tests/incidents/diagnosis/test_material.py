"""What counts as a new moment of a problem: material changes of a subject (incidents.diagnosis.material_change)."""

from __future__ import annotations

from incidents.diagnosis.material_change import digest, material

KAI_WAITING = {
    "phase": "Pending",
    "project": "vision",
    "gpus_total": 4,
    "active": 1,
    "failed": 0,
    "scheduling": [
        {
            "type": "UnschedulableOnNodePool",
            "reason": "OverLimit",
            "status": "False",
            "since": "2026-11-29T03:04:00Z",
            "message": "OverLimit: vision quota has reached the allowable limit of GPUs. Limit is 8 GPUs, "
            "currently 54 GPUs allocated and workload requested 4 GPUs.",
        }
    ],
}


def _with(state: dict, **changes) -> dict:
    out = {**state, "scheduling": [dict(state["scheduling"][0])]}
    for key, value in changes.items():
        if key in out["scheduling"][0]:
            out["scheduling"][0][key] = value
        else:
            out[key] = value
    return out


def test_the_counts_in_a_scheduler_message_and_its_time_are_not_news() -> None:
    later = _with(
        KAI_WAITING,
        since="2026-11-29T03:08:00Z",
        message="OverLimit: vision quota has reached the allowable limit of GPUs. Limit is 8 GPUs, "
        "currently 50 GPUs allocated and workload requested 4 GPUs.",
    )
    assert digest(later) == digest(KAI_WAITING)


def test_another_reason_phase_request_or_a_deletion_is_news() -> None:
    base = digest(KAI_WAITING)
    assert digest(_with(KAI_WAITING, reason="NonPreemptibleOverQuota")) != base
    assert (
        digest(_with(KAI_WAITING, message="0/8 nodes are available: 8 Insufficient nvidia.com/gpu.")) != base
    )
    assert digest(_with(KAI_WAITING, phase="Running")) != base
    assert digest(_with(KAI_WAITING, gpus_total=8)) != base
    assert digest(KAI_WAITING, deleted=True) != base


def test_a_counter_counts_only_whether_it_happened() -> None:
    pod = {"containers": [{"name": "main", "restart_count": 0, "state": {"running": {}}}]}
    crashed = {"containers": [{"name": "main", "restart_count": 1, "state": {"running": {}}}]}
    again = {"containers": [{"name": "main", "restart_count": 7, "state": {"running": {}}}]}
    assert digest(pod) != digest(crashed)
    assert digest(crashed) == digest(again)
    assert digest(_with(KAI_WAITING, failed=1)) != digest(KAI_WAITING)
    assert digest(_with(KAI_WAITING, failed=3)) == digest(_with(KAI_WAITING, failed=1))


def test_numbers_outside_free_text_stay_exact() -> None:
    quota = {"quota_gpus": 16, "limit_gpus": 24, "namespace": "vision"}
    assert digest({**quota, "quota_gpus": 8}) != digest(quota)
    node = {"node": "h100-03", "exitCode": 137}
    assert material(node) == node
    assert digest({**node, "node": "h100-04"}) != digest(node)
    assert digest({**node, "exitCode": 1}) != digest(node)


def test_back_off_and_finish_times_of_a_crash_loop_are_not_news() -> None:
    def pod(back_off: str, finished: str, restarts: int) -> dict:
        return {
            "phase": "Running",
            "containers": [
                {
                    "state": {
                        "waiting": {
                            "reason": "CrashLoopBackOff",
                            "message": f"back-off {back_off} restarting",
                        }
                    },
                    "last_state": {"terminated": {"reason": "Error", "exitCode": 1, "finishedAt": finished}},
                    "restart_count": restarts,
                }
            ],
        }

    assert digest(pod("1m20s", "2026-11-29T00:31:00Z", 3)) == digest(pod("5m0s", "2026-11-29T01:46:00Z", 9))
