"""Which device the models train on, by a name given on the command line or in a config."""

from __future__ import annotations

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
