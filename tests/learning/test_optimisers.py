"""The optimiser presets: the authors' Adam schedule, and the registry's errors."""

from __future__ import annotations

import pytest
import torch

from mcfl_chain.learning.optimisers import OPTIMISER_NAMES, get_optimiser


def test_adam_steplr_is_the_authors_adam_decayed_tenfold_per_epoch() -> None:
    # Prepare
    param = torch.nn.Parameter(torch.zeros(3))
    # Execute
    optimiser, end_of_epoch = get_optimiser("adam-steplr").build(
        [param], lr=0.05, momentum=0.9, weight_decay=0.0
    )
    assert end_of_epoch is not None
    rates = [optimiser.param_groups[0]["lr"]]
    for _ in range(2):
        end_of_epoch()
        rates.append(optimiser.param_groups[0]["lr"])
    # Assert: Adam at 1e-3, whatever the configured SGD rate, then 1e-4, 1e-5
    assert isinstance(optimiser, torch.optim.Adam)
    assert rates == pytest.approx([1e-3, 1e-4, 1e-5])
    sgd, none = get_optimiser("sgd").build([param], lr=0.05, momentum=0.9, weight_decay=0.0)
    assert isinstance(sgd, torch.optim.SGD) and none is None
    assert OPTIMISER_NAMES[0] == "sgd"
    with pytest.raises(ValueError, match="adam-steplr, sgd"):
        get_optimiser("adam")
