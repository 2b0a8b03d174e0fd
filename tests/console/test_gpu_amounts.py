"""web.gpu_amounts: the one way the pages write whole GPUs, KAI shares, GPU memory and MIG instances,
and web.inventory.sharing: who holds a GPU at t, KAI's reservation pod named apart from the users."""

from __future__ import annotations

import pytest

from web import gpu_amounts as A
from web.inventory.sharing import gpu_use


@pytest.mark.parametrize(
    ("product", "words"),
    [
        ("NVIDIA-L40S", "an L40S"),
        ("NVIDIA A100 SXM4 80GB", "an A100"),
        ("NVIDIA-H100-80GB-HBM3", "an H100"),
        ("Tesla-T4", "a Tesla"),
        ("NVIDIA-T4", "a T4"),
        ("", "a GPU"),
        (None, "a GPU"),
    ],
)
def test_it_names_the_product_with_its_article(product: str | None, words: str) -> None:
    assert A.a_gpu(product) == words


def test_it_writes_memory_in_gib_as_people_say_it() -> None:
    assert A.gib(24576) == "24 GiB"
    assert A.gib(23034) == "22.5 GiB"
    assert A.gib(None) == ""


def test_it_writes_a_fraction_with_its_memory() -> None:
    assert A.share_words(0.5, None, "NVIDIA-L40S", 46068) == "0.5 of an L40S, 22.5 GiB"
    assert A.share_words(0.25, 11517, "NVIDIA L40S") == "0.25 of an L40S, 11.2 GiB"
    assert A.share_words(0.5, None) == "0.5 of a GPU"


def test_it_writes_a_memory_share_with_its_part_of_the_gpu() -> None:
    assert A.share_words(None, 20480, "NVIDIA-L40S", 46068) == "20 GiB of GPU memory (0.445 of an L40S)"
    assert A.share_words(None, 20480) == "20 GiB of GPU memory"


def test_it_writes_mig_instances_by_profile() -> None:
    assert A.mig_words({"1g.10gb": 2, "3g.40gb": 1, "2g.20gb": 0}) == "2 × 1g.10gb + 1 × 3g.40gb"
    assert A.per_pod_words({"gpus_per_pod": 0, "mig": {"1g.10gb": 1}}) == "1g.10gb"
    assert A.job_words({"pods": 2, "gpus_per_pod": 0, "mig": {"1g.10gb": 1}}) == "2 × 1g.10gb"


def test_it_writes_a_request_of_whole_gpus_shares_and_none() -> None:
    assert A.state_request_words({"gpus_per_pod": 8}) == "8 GPUs"
    assert A.state_request_words({"gpus": 1}) == "1 GPU"
    assert A.state_request_words({"gpus": 0, "gpu_share": {"fraction": 0.5}}) == "0.5 of a GPU"
    assert A.state_request_words({"gpus": 0}) == "no GPU"
    assert A.job_words({"pods": 4, "gpus_per_pod": 0, "gpu_share": {"fraction": 0.5}}) == "4 × 0.5 of a GPU"


def test_units_count_fractions_and_say_when_unknown() -> None:
    assert A.units_of({"gpu_units": 0.5, "gpus_total": 0}) == 0.5
    assert A.units_of({"gpus_total": 16}) == 16
    assert A.units_of({"gpus_total": 0, "gpu_share": {"memory_mib": 20480}}) is None


def test_it_tells_kai_reservation_pods_by_namespace_or_labels() -> None:
    assert A.is_reservation("runai-reservation")
    assert A.is_reservation("kai", {"app.kubernetes.io/name": "kai-resource-reservation"})
    assert not A.is_reservation("vision", {"app": "notebook"})
    assert A.is_reservation_key("runai-reservation/gpu-reservation-l40s-01-abcde")


SHARED = {
    "model": "NVIDIA L40S",
    "pod": "runai-reservation/gpu-reservation-l40s-01-kwxbh",
    "reservation": "runai-reservation/gpu-reservation-l40s-01-kwxbh",
    "shares": [
        {"pod": "serving/embed-svc-0", "fraction": 0.445, "memory_mib": 20480},
        {"pod": "vision/notebook-ana-0", "fraction": 0.5, "memory_mib": 23034},
    ],
}


def test_a_shared_gpu_is_used_by_its_shares_and_held_by_the_reservation_pod() -> None:
    use = gpu_use(SHARED, lambda pod: pod or None)
    assert use.kind == "shared"
    assert [(h.pod, h.words) for h in use.holders] == [
        ("serving/embed-svc-0", "0.445 of an L40S, 20 GiB"),
        ("vision/notebook-ana-0", "0.5 of an L40S, 22.5 GiB"),
    ]
    assert use.reservation is not None and use.reservation.pod == SHARED["reservation"]
    assert all(not A.is_reservation_key(h.pod) for h in use.holders)
    assert use.free_words == "0.055 of the GPU free"


def test_a_reservation_pod_alone_is_not_a_user() -> None:
    use = gpu_use({"pod": "runai-reservation/r-1", "model": "NVIDIA L40S"}, lambda pod: pod)
    assert use.kind == "shared" and use.holders == [] and use.reservation is not None


def test_a_mig_gpu_is_used_by_the_pods_on_its_instances() -> None:
    state = {
        "pod": "nlp/eval-0",
        "mig": [
            {"gi_id": 1, "profile": "3g.40gb", "pod": None},
            {"gi_id": 3, "profile": "1g.10gb", "pod": "nlp/eval-0"},
            {"gi_id": 4, "profile": "1g.10gb", "pod": "nlp/eval-1"},
        ],
    }
    use = gpu_use(state, lambda pod: pod)
    assert use.kind == "mig" and use.instances == 3
    assert [(h.pod, h.words) for h in use.holders] == [
        ("nlp/eval-0", "1g.10gb (GI 3)"),
        ("nlp/eval-1", "1g.10gb (GI 4)"),
    ]
    assert use.free_words == "2 of 3 instances in use, free 1 × 3g.40gb"


def test_a_whole_gpu_is_used_by_its_pod() -> None:
    assert [h.pod for h in gpu_use({"pod": "llm/train-0"}, lambda pod: pod).holders] == ["llm/train-0"]
    assert gpu_use({"pod": None}, lambda pod: pod).holders == []


def test_a_list_note_says_what_the_units_leave_unsaid() -> None:
    assert A.job_note({"pods": 1, "gpu_share": {"fraction": 0.5}}) == "share"
    assert A.job_note({"pods": 2, "gpu_share": {"fraction": None, "memory_mib": 20480}}) == "2 × 20 GiB share"
    assert A.job_note({"pods": 2, "gpus_per_pod": 0, "mig": {"1g.10gb": 1}}) == "2 × 1g.10gb"
    assert A.job_note({"pods": 2, "gpus_per_pod": 8}) == ""


def test_a_mig_instance_of_a_pod_that_had_ended_is_not_in_use() -> None:
    state = {
        "mig": [
            {"gi_id": 1, "profile": "1g.10gb", "pod": "edge/eval-4"},
            {"gi_id": 2, "profile": "1g.10gb", "pod": "edge/eval-6"},
        ]
    }
    use = gpu_use(state, lambda pod: pod, ended={"edge/eval-4"})
    assert [h.pod for h in use.holders] == ["edge/eval-6"]
    assert use.free_words.startswith("1 of 2 instances in use, free 1 × 1g.10gb (1 still named by DCGM")
