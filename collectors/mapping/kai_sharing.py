"""The labels and annotations of KAI's GPU sharing (KAI Scheduler docs/gpu-sharing; what its binder writes)."""

from __future__ import annotations

GPU_FRACTION_ANNOTATION = "gpu-fraction"
GPU_MEMORY_ANNOTATION = "gpu-memory"  # MiB
GPU_INDEX_ANNOTATION = "runai-gpu"  # the GPU index KAI chose for a shared pod
GPU_GROUP_LABEL = "runai-gpu-group"
RESERVATION_NAMESPACE = "runai-reservation"
RESERVATION_GPU_ANNOTATION = "run.ai/reserve_for_gpu_index"  # the reservation pod's GPU (UUID)
