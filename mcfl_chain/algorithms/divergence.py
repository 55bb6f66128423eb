"""How far a peer's update lies from the trainer's own (paper Eq. 2, thesis §7.3).

Updates are compared as flat vectors of all their parameters, laid out by
:func:`flatten_state` in a fixed key order so every trainer builds the same vector.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch


def flatten_state(state: Mapping[str, torch.Tensor | np.ndarray]) -> np.ndarray:
    """Concatenate a state dict's floating-point tensors into one float64 vector.

    Keys are taken in sorted order (not insertion order), so two state dicts with the
    same tensors give the same vector. Non-floating tensors (integer counters) are left
    out: they are not weights.

    Parameters
    ----------
    state : Mapping[str, torch.Tensor | numpy.ndarray]
        The model's tensors.

    Returns
    -------
    numpy.ndarray
        1-D float64 vector.
    """
    parts = []
    for key in sorted(state):
        value = state[key]
        array = (
            value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
        )
        if np.issubdtype(array.dtype, np.floating):
            parts.append(array.astype(np.float64, copy=False).ravel())
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.float64)


def unflatten_state(
    vector: np.ndarray, template: Mapping[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """The inverse of :func:`flatten_state`: ``template``'s tensors with the floating-point
    ones read from ``vector`` (in sorted key order, cast to each tensor's dtype) and the
    others copied.

    Raises
    ------
    ValueError
        If ``vector`` does not hold exactly the template's floating-point values.
    """
    state: dict[str, torch.Tensor] = {}
    offset = 0
    for key in sorted(template):
        tensor = template[key]
        if not tensor.is_floating_point():
            state[key] = tensor.detach().clone()
            continue
        size = tensor.numel()
        part = vector[offset : offset + size]
        if part.shape[0] != size:
            raise ValueError(
                f"the vector holds {vector.shape[0]} values, fewer than the template's "
                f"floating-point weights (short at {key!r})"
            )
        state[key] = (
            torch.from_numpy(np.array(part, dtype=np.float64))
            .reshape(tensor.shape)
            .to(tensor.dtype)
        )
        offset += size
    if offset != vector.shape[0]:
        raise ValueError(
            f"the vector holds {vector.shape[0]} values, the template's floating-point "
            f"weights {offset}"
        )
    return {key: state[key] for key in template}


def _check_pair(own: np.ndarray, peer: np.ndarray) -> None:
    if own.shape != peer.shape:
        raise ValueError(
            f"cannot compare updates of different sizes: own {own.shape}, peer {peer.shape}"
        )


def weight_divergence(own: np.ndarray, peer: np.ndarray) -> float:
    """Relative L2 weight divergence, paper Eq. 2: ``‖w_peer − w_own‖₂ / ‖w_own‖₂``.

    Parameters
    ----------
    own, peer : numpy.ndarray
        The trainer's own update and a peer's, flattened the same way.

    Returns
    -------
    float
        0 for identical weights; grows with the distance relative to the own weights' norm.

    Raises
    ------
    ValueError
        If the vectors differ in shape or the own vector is all zeros.
    """
    _check_pair(own, peer)
    norm = float(np.linalg.norm(own))
    if norm == 0.0:
        raise ValueError("weight divergence is undefined: the own update's weights are all zero")
    return float(np.linalg.norm(peer - own)) / norm


def cosine_distance(own: np.ndarray, peer: np.ndarray) -> float:
    """Cosine distance ``1 − cos(own, peer)``, in [0, 2] (thesis §7.3).

    Unlike Eq. 2 it sees the direction of a change, not its size: pass update deltas
    (update weights − parent weights) to compare the directions trainers moved in.

    Raises
    ------
    ValueError
        If the vectors differ in shape or either is all zeros (no direction).
    """
    _check_pair(own, peer)
    norms = float(np.linalg.norm(own)) * float(np.linalg.norm(peer))
    if norms == 0.0:
        raise ValueError("cosine distance is undefined for an all-zero vector (no direction)")
    cosine = float(np.dot(own, peer)) / norms
    return 1.0 - min(1.0, max(-1.0, cosine))
