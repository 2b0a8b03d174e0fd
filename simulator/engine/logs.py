"""Container log lines: ordinary startup noise plus what the failure leaves behind.

The lines are what a PyTorch training container prints, so that the one line
that matters (the scenario's ``log``, or torch's CUDA OOM text) has to be found
among others, as on a real cluster.
"""

from __future__ import annotations

from typing import Any

from ..state import SimJob, SimPod


def startup_lines(job: SimJob, pod: SimPod) -> list[str]:
    world_size = job.pods * max(job.gpus_per_pod, 1)
    return [
        f"INFO     launcher: starting {job.name} (image {pod.image})",
        "INFO     torch 2.4.0+cu124, CUDA 12.4, cuDNN 90100",
        f"INFO     visible devices: {pod.gpus_requested} x CUDA",
        f"INFO     distributed init: backend=nccl world_size={world_size} rank={pod.index * max(job.gpus_per_pod, 1)}",
        "INFO     NCCL version 2.21.5+cuda12.4",
        "INFO     loading configuration",
    ]


def progress_line(job: SimJob, pod: SimPod, done_s: float) -> str:
    step = int(done_s // 3)
    loss = max(0.05, 3.2 / (1 + done_s / 3600))
    return f"INFO     step {step} loss={loss:.4f} throughput={int(900 * job.sm_activity)} samples/s"


def crash_lines(job: SimJob, pod: SimPod, fail: dict[str, Any], memory_mib: int) -> list[str]:
    kind = fail.get("kind", "crashloop")
    log = fail.get("log")
    if kind == "gpu_oom":
        total = memory_mib / 1024
        lines = [
            "INFO     building model",
            "INFO     epoch 0 starting",
            "Traceback (most recent call last):",
            '  File "/workspace/train.py", line 211, in <module>',
            "    main()",
            '  File "/workspace/train.py", line 187, in train_step',
            "    loss.backward()",
            f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB. GPU 0 has a total capacity of "
            f"{total:.2f} GiB of which 1.06 GiB is free. Including non-PyTorch memory, this process has "
            f"{total - 1.06:.2f} GiB memory in use. Of the allocated memory {total - 4.9:.2f} GiB is allocated by "
            f"PyTorch, and 2.41 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is "
            f"large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
            f"documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
        ]
        if log:
            lines.insert(2, log)
        return lines
    if kind == "oom_killed":
        # The kernel kills the process: no traceback, the log just stops.
        lines = ["INFO     loading dataset shards into memory", "INFO     epoch 0 step 120 loss=2.3104"]
        if log:
            lines.append(log)
        return lines
    lines = [
        "Traceback (most recent call last):",
        '  File "/workspace/train.py", line 42, in <module>',
        "    main()",
        '  File "/workspace/train.py", line 17, in main',
        "    cfg = load_config(args.config)",
    ]
    lines.append(log or "RuntimeError: CUDA error: an illegal memory access was encountered")
    return lines
