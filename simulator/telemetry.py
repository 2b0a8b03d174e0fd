"""DCGM telemetry as a deterministic function of time, for any GPU and any t within retention.

Nothing is sampled or stored per scrape: the engine records change points
(which pod holds a GPU from when, at what SM activity and framebuffer use;
presence; Xid; ECC counters; temperature overrides; NVLink error bursts) and
every metric is derived from them at the asked time, with noise from a stable
hash of (seed, GPU UUID, metric, minute). So a Prometheus ``query_range`` over
a day costs a few bisects per point, and the same seed gives the same curves.
"""
# size: the GPU telemetry model: its step series and the range paths that read them together

from __future__ import annotations

import hashlib
from bisect import bisect_left, bisect_right
from datetime import datetime
from typing import Any

METRICS = (
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_MEM_COPY_UTIL",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_MEMORY_TEMP",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_SM_CLOCK",
    "DCGM_FI_DEV_MEM_CLOCK",
    "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
    "DCGM_FI_PROF_SM_ACTIVE",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_PROF_DRAM_ACTIVE",
)
THROTTLE_TEMP_C = 85.0
GpuKey = int | tuple[int, int]  # a GPU's index on its node, or (GPU index, GPU instance id) under MIG
_ZERO_WHEN_IDLE = frozenset(
    (
        "DCGM_FI_PROF_SM_ACTIVE",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_MEM_COPY_UTIL",
    )
)
# (TDP W, idle W, max SM clock MHz, memory clock MHz, framebuffer reserved MiB)
_PRODUCTS = (
    ("H100", (700.0, 70.0, 1980, 2619, 530)),
    ("H200", (700.0, 75.0, 1980, 3201, 560)),
    ("B200", (1000.0, 120.0, 1965, 3996, 600)),
    ("A100-SXM4-80GB", (400.0, 55.0, 1410, 1593, 470)),
    ("A100-SXM4-40GB", (400.0, 52.0, 1410, 1215, 420)),
    ("A100", (300.0, 40.0, 1410, 1512, 450)),
    ("L40S", (350.0, 35.0, 2520, 9001, 590)),
    ("L4", (72.0, 16.0, 2040, 6251, 330)),
    ("A10G", (300.0, 25.0, 1710, 6251, 340)),
    ("T4", (70.0, 10.0, 1590, 5001, 250)),
)


# The profiling ratios' level factor and noise amplitude (DCGM_FI_PROF_*: ``_compute``).
_PROFILE_SHAPE = {
    "DCGM_FI_PROF_SM_ACTIVE": (1.0, 0.04),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": (1.04, 0.04),
    "DCGM_FI_PROF_DRAM_ACTIVE": (0.55, 0.03),
}


def _specs(product: str) -> tuple[float, float, int, int, int]:
    for key, spec in _PRODUCTS:
        if key in product:
            return spec
    return (400.0, 50.0, 1500, 1500, 400)


def _minute_noise(prefix: str, minute: int) -> float:
    """``Telemetry.noise`` of the series ``prefix`` names (seed, GPU UUID, metric) in one minute."""
    h = hashlib.blake2b(f"{prefix}{minute}".encode(), digest_size=8).digest()
    return int.from_bytes(h, "big") / 2**64 - 0.5


def _clamp(x: float, lo: float = 0.0, hi: float = 1.0) -> float:
    return lo if x < lo else hi if x > hi else x


class Steps:
    """A piecewise-constant series: value from each change time until the next."""

    __slots__ = ("t", "v")

    def __init__(self, t0: float, v0: Any) -> None:
        self.t = [t0]
        self.v = [v0]

    def set(self, t: float, v: Any) -> None:
        if self.t[-1] == t:
            self.v[-1] = v
        elif self.v[-1] != v:
            self.t.append(t)
            self.v.append(v)

    def at(self, t: float) -> Any:
        if len(self.t) == 1:  # most series never change: no bisection
            return self.v[0] if t >= self.t[0] else None
        i = bisect_right(self.t, t) - 1
        return self.v[i] if i >= 0 else None

    def prune(self, cutoff: float) -> None:
        i = bisect_right(self.t, cutoff) - 1
        if i > 0:
            del self.t[:i]
            del self.v[:i]


def _walk(steps: Steps, times: list[float]) -> list[Any]:
    """``steps.at`` at each of ``times`` (ascending), walking the change points once."""
    tv, vv = steps.t, steps.v
    if len(tv) == 1:
        return [vv[0] if ts >= tv[0] else None for ts in times]
    i, n = bisect_right(tv, times[0]) - 1, len(tv)
    out: list[Any] = []
    for ts in times:
        while i + 1 < n and tv[i + 1] <= ts:
            i += 1
        out.append(vv[i] if i >= 0 else None)
    return out


class GpuSeries:
    __slots__ = (
        "uuid",
        "product",
        "memory_mib",
        "created",
        "activity",
        "present",
        "xid",
        "ecc",
        "temp",
        "nvlink",
        "specs",
    )

    def __init__(self, uuid: str, product: str, memory_mib: int, created: float) -> None:
        self.uuid = uuid
        self.product = product
        self.memory_mib = memory_mib
        self.created = created
        self.specs = _specs(product)
        self.activity = Steps(created, (None, 0.0, 0))  # (pod key, SM activity level, framebuffer MiB)
        self.present = Steps(created, True)
        self.xid = Steps(created, 0)
        self.ecc = Steps(created, (0, 0))  # (sbe total, dbe total), volatile
        self.temp = Steps(created, None)  # override in C, None = modelled from load
        self.nvlink = Steps(created, (0, 0.0, created))  # (count at t0, rate per second, t0)


class Telemetry:
    """Change points for every GPU, and the metric functions over them."""

    def __init__(self, seed: int, *, retention_s: int = 86400) -> None:
        self.seed = seed
        self.retention_s = retention_s
        self.gpus: dict[tuple[str, GpuKey], GpuSeries] = {}
        self.node_up: dict[str, Steps] = {}
        self.now = 0.0
        self._last_prune = 0.0
        # The last minute's noise() per (GPU, metric): a range query reads a series' samples in time order,
        # four per minute at a 15 s scrape, so the hash is computed once a minute, not once a sample.
        self._noise: dict[tuple[str, str], tuple[int, float]] = {}

    # Recording (the engine calls these as things happen)

    def add_gpu(
        self, node: str, index: GpuKey, uuid: str, product: str, memory_mib: int, at: datetime
    ) -> None:
        self.gpus[(node, index)] = GpuSeries(uuid, product, memory_mib, at.timestamp())
        self.node_up.setdefault(node, Steps(at.timestamp(), True))

    def set_activity(
        self, node: str | None, index: GpuKey, at: datetime, pod: str | None, level: float, fb_mib: int
    ) -> None:
        if node is not None:
            self.gpus[(node, index)].activity.set(at.timestamp(), (pod, float(level), int(fb_mib)))

    def set_present(self, node: str, index: GpuKey, at: datetime, present: bool) -> None:
        self.gpus[(node, index)].present.set(at.timestamp(), present)

    def set_node_up(self, node: str, at: datetime, up: bool) -> None:
        self.node_up[node].set(at.timestamp(), up)

    def set_xid(self, node: str, index: GpuKey, at: datetime, code: int) -> None:
        self.gpus[(node, index)].xid.set(at.timestamp(), code)

    def set_ecc(self, node: str, index: GpuKey, at: datetime, sbe: int, dbe: int) -> None:
        self.gpus[(node, index)].ecc.set(at.timestamp(), (sbe, dbe))

    def set_temp(self, node: str, index: GpuKey, at: datetime, temp_c: float | None) -> None:
        self.gpus[(node, index)].temp.set(at.timestamp(), temp_c)

    def set_nvlink(self, node: str, index: GpuKey, at: datetime, count: int, rate_per_s: float) -> None:
        ts = at.timestamp()
        self.gpus[(node, index)].nvlink.set(ts, (count, rate_per_s, ts))

    def prune(self, now: datetime) -> None:
        """Forget change points older than retention (hourly, so ticks stay cheap)."""
        self.now = now.timestamp()
        if self.now - self._last_prune < 3600:
            return
        self._last_prune = self.now
        cutoff = self.now - self.retention_s
        for s in self.gpus.values():
            for steps in (s.activity, s.present, s.xid, s.ecc, s.temp, s.nvlink):
                steps.prune(cutoff)
        for steps in self.node_up.values():
            steps.prune(cutoff)

    # Reading

    def _series(self, node: str, index: GpuKey, ts: float) -> GpuSeries | None:
        s = self.gpus.get((node, index))
        if s is None or ts < s.created or (self.now and ts < self.now - self.retention_s):
            return None
        if not s.present.at(ts) or not self.node_up[node].at(ts):
            return None  # fell off the bus, or the node (and its exporter) is down: no series
        return s

    def pod_at(self, node: str, index: GpuKey, t: datetime) -> str | None:
        s = self.gpus.get((node, index))
        if s is None:
            return None
        act = s.activity.at(t.timestamp())
        return act[0] if act else None

    def noise(self, uuid: str, metric: str, ts: float) -> float:
        """Uniform in [-0.5, 0.5), stable for (seed, GPU, metric, minute)."""
        minute = int(ts // 60)
        last = self._noise.get((uuid, metric))
        if last is not None and last[0] == minute:
            return last[1]
        value = _minute_noise(f"{self.seed}|{uuid}|{metric}|", minute)
        self._noise[(uuid, metric)] = (minute, value)
        return value

    def value(self, node: str, index: GpuKey, metric: str, t: datetime) -> float | None:
        if metric not in METRICS:
            raise ValueError(f"unknown DCGM metric {metric!r}; known: {', '.join(METRICS)}")
        ts = t.timestamp()
        s = self._series(node, index, ts)
        return None if s is None else self._compute(s, metric, ts)

    def values(self, node: str, index: GpuKey, metric: str, times: list[float]) -> list[float | None]:
        """``value`` at each of ``times`` (epoch seconds, ascending): one series read for a range query,
        without a datetime or a lookup of the GPU per sample."""
        if metric not in METRICS:
            raise ValueError(f"unknown DCGM metric {metric!r}; known: {', '.join(METRICS)}")
        s = self.gpus.get((node, index))
        if s is None:
            return [None] * len(times)
        up = self.node_up[node]
        floor = self.now - self.retention_s if self.now else None
        created = s.created
        compute = self._compute
        present = s.present
        if len(times) == 1:  # an instant read (last_over_time over a fleet): one sample, no walk to set up
            ts = times[0]
            if ts < created or (floor is not None and ts < floor) or not present.at(ts) or not up.at(ts):
                return [None]
            return [compute(s, metric, ts)]
        if len(present.t) == 1 and len(up.t) == 1:  # never fell off the bus, node never down: one bound
            if not (present.v[0] and up.v[0]):
                return [None] * len(times)
            lo = max(created, present.t[0], up.t[0], created if floor is None else floor)
            first = bisect_left(times, lo)
            return [None] * first + self._compute_many(s, metric, times[first:])
        out: list[float | None] = []
        for ts in times:
            if ts < created or (floor is not None and ts < floor) or not s.present.at(ts) or not up.at(ts):
                out.append(None)
            else:
                out.append(compute(s, metric, ts))
        return out

    # length: the hot loop of range queries: one frame, the metric dispatched once per series
    def _compute_many(self, s: GpuSeries, metric: str, times: list[float]) -> list[float | None]:
        """``_compute`` at each of ``times`` (ascending, all where the series is present), equal to it sample
        by sample: the change points are walked once instead of bisected per sample, the noise is hashed once
        a minute, and the metric is dispatched once per series (a range query over 1,600 GPUs reads ~10^6
        samples: bench/telemetry.py --part server)."""
        if not times:
            return []
        if metric == "DCGM_FI_DEV_XID_ERRORS":
            return [float(x) for x in _walk(s.xid, times)]
        if metric in ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"):
            k = 0 if metric == "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL" else 1
            return [float(e[k]) for e in _walk(s.ecc, times)]
        if metric == "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL":
            return [
                float(int(c + r * max(0.0, ts - t0)))
                for ts, (c, r, t0) in zip(times, _walk(s.nvlink, times), strict=True)
            ]
        tdp, idle_w, max_clock, mem_clock, reserved = s.specs
        if metric == "DCGM_FI_DEV_MEM_CLOCK":
            return [float(mem_clock)] * len(times)
        acts = _walk(s.activity, times)
        uuid = s.uuid
        out: list[float | None] = []
        append = out.append
        # The noise (``noise``, its minute check inlined: one sample costs a few operations, a call per sample
        # would double it) is hashed once a minute per series, and only for the samples that read it.
        prefix = f"{self.seed}|{uuid}|{metric}|"
        minute, n = -1, 0.0
        if metric in _ZERO_WHEN_IDLE:
            # An idle sample is 0 whatever the noise: the noise is hashed for busy samples only.
            scale, spread = _PROFILE_SHAPE.get(metric, (1.0, 0.0))
            for (_pod, level, _fb), ts in zip(acts, times, strict=True):
                if level <= 0.0:
                    append(0.0)
                    continue
                m = int(ts // 60)
                if m != minute:
                    minute, n = m, _minute_noise(prefix, m)
                if metric == "DCGM_FI_DEV_GPU_UTIL":
                    x = min(1.0, level * 1.2) + 0.03 * n
                    append(float(round(100 * (0.0 if x < 0.0 else 1.0 if x > 1.0 else x))))
                elif metric == "DCGM_FI_DEV_MEM_COPY_UTIL":
                    append(float(max(0, round(level * 38 + 2 * n))))
                else:  # the profiling ratios: level scaled, plus noise, clamped to [0, 1]
                    x = level * scale + spread * n
                    append(round(0.0 if x < 0.0 else 1.0 if x > 1.0 else x, 4))
            return out
        room = s.memory_mib - reserved
        if metric in ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE"):
            # Framebuffer: the noise moves a used framebuffer only; no temperature.
            free = metric == "DCGM_FI_DEV_FB_FREE"
            for (_pod, _level, fb), ts in zip(acts, times, strict=True):
                if fb:
                    m = int(ts // 60)
                    if m != minute:
                        minute, n = m, _minute_noise(prefix, m)
                    used = min(room, max(0, fb + int(64 * n)))
                else:
                    used = min(room, max(0, fb))
                append(float(room - used if free else used))
            return out
        overrides = _walk(s.temp, times)
        # The modelled temperature reads the "temp" noise; power and memory temperature their own as well.
        temp_prefix = f"{self.seed}|{uuid}|temp|"
        temp_minute, temp_n = -1, 0.0
        own = metric in ("DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_MEMORY_TEMP")
        for (_pod, level, _fb), override, ts in zip(acts, overrides, times, strict=True):
            if override is not None:
                temp = override
            else:
                m = int(ts // 60)
                if m != temp_minute:
                    temp_minute, temp_n = m, _minute_noise(temp_prefix, m)
                temp = 31 + 42 * level + 2 * temp_n
            if own:
                m = int(ts // 60)
                if m != minute:
                    minute, n = m, _minute_noise(prefix, m)
            if metric == "DCGM_FI_DEV_POWER_USAGE":
                watts = idle_w + (tdp - idle_w) * level * 0.92 + 6 * n
                append(round(watts * (0.7 if temp >= THROTTLE_TEMP_C else 1.0), 3))
            elif metric == "DCGM_FI_DEV_GPU_TEMP":
                append(float(round(temp)))
            elif metric == "DCGM_FI_DEV_MEMORY_TEMP":
                append(float(round(temp + 4 + n)))
            elif metric == "DCGM_FI_DEV_SM_CLOCK":
                clock = max_clock if level >= 0.02 else 345
                append(float(int(clock * 0.62) if temp >= THROTTLE_TEMP_C else clock))
            else:
                raise AssertionError(metric)  # every metric of METRICS is handled above
        return out

    def pods(self, node: str, index: GpuKey, times: list[float]) -> list[str | None]:
        """``pod_at`` at each of ``times`` (epoch seconds, ascending)."""
        s = self.gpus.get((node, index))
        if s is None:
            return [None] * len(times)
        return [act[0] if act else None for act in _walk(s.activity, times)] if times else []

    def _compute(self, s: GpuSeries, metric: str, ts: float) -> float | None:
        """The value of a present GPU's series at ``ts``."""
        # Counters and clocks need neither the load nor the noise: only what the metric reads is computed.
        if metric == "DCGM_FI_DEV_XID_ERRORS":
            return float(s.xid.at(ts))
        if metric == "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL":
            return float(s.ecc.at(ts)[0])
        if metric == "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL":
            return float(s.ecc.at(ts)[1])
        if metric == "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL":
            count, rate, t0 = s.nvlink.at(ts)
            return float(int(count + rate * max(0.0, ts - t0)))
        tdp, idle_w, max_clock, mem_clock, reserved = s.specs
        if metric == "DCGM_FI_DEV_MEM_CLOCK":
            return float(mem_clock)
        pod, level, fb = s.activity.at(ts)
        busy = level > 0.0
        if not busy and metric in _ZERO_WHEN_IDLE:
            return 0.0
        n = self.noise(s.uuid, metric, ts)
        if metric == "DCGM_FI_PROF_SM_ACTIVE":
            return round(_clamp(level + 0.04 * n), 4) if busy else 0.0
        if metric == "DCGM_FI_PROF_GR_ENGINE_ACTIVE":
            return round(_clamp(level * 1.04 + 0.04 * n), 4) if busy else 0.0
        if metric == "DCGM_FI_PROF_DRAM_ACTIVE":
            return round(_clamp(level * 0.55 + 0.03 * n), 4) if busy else 0.0
        if metric == "DCGM_FI_DEV_GPU_UTIL":
            return float(round(100 * _clamp(min(1.0, level * 1.2) + 0.03 * n))) if busy else 0.0
        if metric == "DCGM_FI_DEV_MEM_COPY_UTIL":
            return float(max(0, round(level * 38 + 2 * n))) if busy else 0.0
        override = s.temp.at(ts)
        temp = override if override is not None else 31 + 42 * level + 2 * self.noise(s.uuid, "temp", ts)
        throttled = temp >= THROTTLE_TEMP_C
        used = min(s.memory_mib - reserved, max(0, fb + (int(64 * n) if fb else 0)))
        if metric == "DCGM_FI_DEV_FB_USED":
            return float(used)
        if metric == "DCGM_FI_DEV_FB_FREE":
            return float(s.memory_mib - reserved - used)
        if metric == "DCGM_FI_DEV_POWER_USAGE":
            watts = idle_w + (tdp - idle_w) * level * 0.92 + 6 * n
            return round(watts * (0.7 if throttled else 1.0), 3)
        if metric == "DCGM_FI_DEV_GPU_TEMP":
            return float(round(temp))
        if metric == "DCGM_FI_DEV_MEMORY_TEMP":
            return float(round(temp + 4 + n))
        if metric == "DCGM_FI_DEV_SM_CLOCK":
            clock = max_clock if level >= 0.02 else 345
            return float(int(clock * 0.62) if throttled else clock)
        raise AssertionError(metric)  # every metric of METRICS is handled above
