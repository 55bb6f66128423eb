"""How far a peer's update lies from the trainer's own (paper Eq. 2, thesis §7.3).

Updates are compared as flat vectors of all their parameters, laid out by
:func:`flatten_state` in a fixed key order so every trainer builds the same vector.
:data:`DIVERGENCE_MEASURES` names the measures a trainer may use (MCFL's
``--divergence``): the relative L2 divergence (``l2``, the default), the cosine distance
of the update deltas (``cosine``) and the authors' element-wise divergence
(``elementwise``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

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


def elementwise_divergence(own: np.ndarray, peer: np.ndarray) -> float:
    """The MCFL authors' divergence: ``Σᵢ |w_peer,i − w_own,i| / w_own,i``.

    What their code computed (Mick00/dml, ``operations.relative_divergence``, the
    default of ``weight_divergence``; thesis §7.3: "la différence absolue entre chacun
    des poids"), not Eq. 2 as printed: each weight's absolute difference is divided by
    the own weight itself, **signed**, and the quotients are summed. A weight near 0
    dominates the sum, and positive and negative own weights cancel, so it separates
    near from far peers much worse than :func:`weight_divergence`; it is here so that
    the authors' rule can be run (an ablation), not as a better measure.

    A coordinate where the own weight is exactly 0 adds 0 when the peer's is 0 too (no
    divergence there) and makes the sum infinite otherwise; Algorithm 2 rejects a peer
    at a non-finite divergence (the authors' code would carry the ``inf`` or ``nan``
    into its statistics).

    Raises
    ------
    ValueError
        If the vectors differ in shape.
    """
    _check_pair(own, peer)
    difference = np.abs(peer - own)
    zero = own == 0
    if np.any(zero & (difference != 0)):
        return float("inf")
    with np.errstate(divide="ignore", invalid="ignore"):
        quotients = np.where(zero, 0.0, difference / np.where(zero, 1.0, own))
    return float(np.sum(quotients))


ROWS_AT_ONCE = 64
"""Peers Algorithm 2 compares in one array operation (64 LeNet-5 updates: 32 MB of
differences); the functions below take whatever rows they are given."""


def _check_rows(own: np.ndarray, peers: np.ndarray) -> None:
    if peers.ndim != 2 or peers.shape[1:] != own.shape:
        raise ValueError(
            f"cannot compare updates of different sizes: own {own.shape}, peers {peers.shape}"
        )


def weight_divergences(own: np.ndarray, peers: np.ndarray) -> np.ndarray:
    """:func:`weight_divergence` of every row of ``peers`` (k × d) from ``own``, as array
    operations over the rows (equal to the pairwise values up to float rounding)."""
    _check_rows(own, peers)
    norm = float(np.linalg.norm(own))
    if norm == 0.0:
        raise ValueError("weight divergence is undefined: the own update's weights are all zero")
    return np.linalg.norm(peers - own, axis=1) / norm


def cosine_distances(own: np.ndarray, peers: np.ndarray) -> np.ndarray:
    """:func:`cosine_distance` of every row of ``peers`` from ``own``, over the rows at once."""
    _check_rows(own, peers)
    norms = np.linalg.norm(peers, axis=1) * float(np.linalg.norm(own))
    if np.any(norms == 0.0):
        raise ValueError("cosine distance is undefined for an all-zero vector (no direction)")
    return 1.0 - np.clip((peers @ own) / norms, -1.0, 1.0)


def elementwise_divergences(own: np.ndarray, peers: np.ndarray) -> np.ndarray:
    """:func:`elementwise_divergence` of every row of ``peers`` from ``own``, over the rows
    at once (``inf`` where a peer differs at a coordinate the own weight is 0)."""
    _check_rows(own, peers)
    zero = own == 0
    difference = np.abs(peers - own)
    infinite = np.any(zero & (difference != 0), axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        sums = np.sum(np.where(zero, 0.0, difference / np.where(zero, 1.0, own)), axis=1)
    return np.where(infinite, np.inf, sums)


BATCHED: dict[Callable[[np.ndarray, np.ndarray], float], Callable[..., np.ndarray]] = {
    weight_divergence: weight_divergences,
    cosine_distance: cosine_distances,
    elementwise_divergence: elementwise_divergences,
}
"""Each pairwise measure's form over many peers at once (Algorithm 2 uses it when given
one of these measures)."""


@dataclass(frozen=True)
class DivergenceMeasure:
    """A divergence a trainer's Algorithm 2 may use.

    Attributes
    ----------
    measure : Callable[[numpy.ndarray, numpy.ndarray], float]
        ``measure(own, peer)``.
    on_deltas : bool
        Whether it compares update deltas (update − parent) rather than the weights.
    """

    measure: Callable[[np.ndarray, np.ndarray], float]
    on_deltas: bool = False


DIVERGENCE_MEASURES: dict[str, DivergenceMeasure] = {
    "l2": DivergenceMeasure(weight_divergence),
    "cosine": DivergenceMeasure(cosine_distance, on_deltas=True),
    "elementwise": DivergenceMeasure(elementwise_divergence),
}
"""Name → measure; MCFL's ``divergence`` option chooses among these names."""
