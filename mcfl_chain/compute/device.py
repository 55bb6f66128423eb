"""Which device the models train on, by a name given on the command line or in a config."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

import torch

DEVICES = ("auto", "cpu", "cuda")
"""Names :func:`resolve_device` accepts."""


def resolve_device(name: str) -> torch.device:
    """The device a name stands for.

    Parameters
    ----------
    name : {"auto", "cpu", "cuda"}
        ``"auto"`` picks CUDA when PyTorch sees a GPU and the CPU otherwise.

    Returns
    -------
    torch.device
        ``cpu`` or ``cuda``.

    Raises
    ------
    ValueError
        If ``name`` is not one of :data:`DEVICES`, or is ``"cuda"`` on a machine where
        PyTorch sees no GPU.
    """
    if name not in DEVICES:
        raise ValueError(f"unknown device {name!r}; choose one of {', '.join(DEVICES)}")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"device 'cuda' was asked for, but PyTorch {torch.__version__} sees no GPU "
            f"(a CPU-only build, no driver or no visible device): install a CUDA build of "
            f"PyTorch on a machine with an NVIDIA GPU, or use device 'cpu' or 'auto'"
        )
    return torch.device(name)


def prepare_device(device: torch.device) -> None:
    """Make ``device`` compute reproducibly: on CUDA, full float32 and deterministic kernels.

    A run must repeat bit for bit on the same engine and device, and a GPU's figures
    must be comparable with the CPU's. By default PyTorch lets cuDNN convolutions use
    TF32 (10-bit mantissas) and picks kernels by benchmark and with atomic adds, whose
    order varies from run to run. LeNet-sized models leave a GPU mostly idle, so the
    exact kernels cost little. Ops without a deterministic CUDA kernel warn instead of
    failing (``warn_only``). Nothing changes on the CPU.
    """
    if device.type != "cuda":
        return
    # cuBLAS reads this when it starts: before the first matrix product.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    torch.use_deterministic_algorithms(True, warn_only=True)


def platform_record(device: torch.device) -> dict[str, Any]:
    """Where a run computed, for its summary: what decides whether another run can
    repeat it bit for bit.

    A batched run repeats exactly on the same engine, device and CPU type, not across
    CPU types: PyTorch dispatches its CPU kernels by the vector instructions the CPU has
    (``cpu_capability``: e.g. ``AVX2`` or ``AVX512``), and kernels of different widths
    sum in different orders. Two runs compared pair by pair must agree here.
    """
    record: dict[str, Any] = {
        "torch": torch.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cpu": _cpu_model(),
        "machine": platform.machine(),
        "cores": os.cpu_count(),
    }
    if device.type == "cuda":
        record["gpu"] = torch.cuda.get_device_name(device)
        record["cuda"] = torch.version.cuda
    return record


def _cpu_model() -> str:
    """The CPU's model name as the kernel reports it (``platform.processor()`` is empty
    on most Linux systems), or the architecture where /proc/cpuinfo has no name."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
