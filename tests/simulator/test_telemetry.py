"""The simulator's DCGM telemetry read for a range equals the same read sample by sample."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from simulator.telemetry import METRICS, Telemetry

T0 = datetime(2026, 11, 29, tzinfo=UTC)


def busy_gpu(seed: int) -> Telemetry:
    """One H100 and one L4 whose load, framebuffer, temperature, Xid, ECC and NVLink counters change
    at random moments over two hours (and the L4 falls off the bus for a while)."""
    rnd = random.Random(seed)
    tel = Telemetry(seed)
    for index, product in ((0, "NVIDIA-H100-80GB-HBM3"), (1, "NVIDIA-L4")):
        tel.add_gpu("n1", index, f"GPU-{seed}-{index}", product, 81559 if index == 0 else 23034, T0)
        for second in sorted(rnd.sample(range(0, 7200), 40)):  # the engine records in time order
            at = T0 + timedelta(seconds=second)
            what = rnd.choice(("load", "idle", "temp", "xid", "ecc", "nvlink"))
            if what == "load":
                tel.set_activity(
                    "n1", index, at, "ns/p", rnd.choice((0.01, 0.3, 0.97)), rnd.randrange(0, 70000)
                )
            elif what == "idle":
                tel.set_activity("n1", index, at, None, 0.0, 0)
            elif what == "temp":
                tel.set_temp("n1", index, at, rnd.choice((None, 90.0, 60.0)))
            elif what == "xid":
                tel.set_xid("n1", index, at, rnd.choice((0, 13, 48)))
            elif what == "ecc":
                tel.set_ecc("n1", index, at, rnd.randrange(0, 5), rnd.randrange(0, 2))
            else:
                tel.set_nvlink("n1", index, at, rnd.randrange(0, 100), rnd.choice((0.0, 0.5)))
        if index == 1:
            tel.set_present("n1", 1, T0 + timedelta(minutes=50), False)
            tel.set_present("n1", 1, T0 + timedelta(minutes=70), True)
    return tel


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("metric", METRICS)
def test_a_range_read_equals_each_sample_read_alone(seed: int, metric: str) -> None:
    tel = busy_gpu(seed)
    start = T0.timestamp() - 120  # before the GPU exists
    times = [start + 15 * i for i in range(0, 8 * 60 + 20)]  # 15 s scrapes over two hours and beyond
    for index in (0, 1):
        one_by_one = [tel.value("n1", index, metric, datetime.fromtimestamp(t, UTC)) for t in times]
        assert tel.values("n1", index, metric, times) == one_by_one
        assert [tel.values("n1", index, metric, [t])[0] for t in times] == one_by_one  # an instant read
        assert any(v is not None for v in one_by_one)


@pytest.mark.parametrize("seed", [1, 2])
def test_the_pods_holding_a_gpu_over_a_range_are_those_of_each_moment(seed: int) -> None:
    tel = busy_gpu(seed)
    times = [T0.timestamp() - 60 + 15 * i for i in range(0, 500)]
    for index in (0, 1):
        one_by_one = [tel.pod_at("n1", index, datetime.fromtimestamp(t, UTC)) for t in times]
        assert tel.pods("n1", index, times) == one_by_one
        assert {"ns/p", None} <= set(one_by_one)
