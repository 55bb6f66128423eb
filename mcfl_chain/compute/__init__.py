"""Where models train and are scored: a device by name, and many models at once.

:mod:`mcfl_chain.compute.device` turns ``"auto"``, ``"cpu"`` or ``"cuda"`` into a
:class:`torch.device`; :mod:`mcfl_chain.compute.batched` trains and scores many models
of one architecture as one batched computation, with the results of the per-model
:func:`~mcfl_chain.learning.training.train` and
:func:`~mcfl_chain.learning.training.evaluate`.
"""

from mcfl_chain.compute.batched import TrainJob, can_batch, evaluate_batched, train_batched
from mcfl_chain.compute.device import DEVICES, resolve_device

__all__ = [
    "DEVICES",
    "TrainJob",
    "can_batch",
    "evaluate_batched",
    "resolve_device",
    "train_batched",
]
