"""The aggregation rules give the same bytes in any process, thread count and input order."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# Twelve LeNet-5 updates rebuilt from seeds in each process. A tenth of the first conv's
# weights is -0.0 in odd updates and +0.0 in even ones, so that an order statistic whose
# sign of zero depended on the sort would show. A float64 "probe" tensor of values spread
# over 16 orders of magnitude shows any change in the order of a float64 sum, which a
# cast to float32 would round away. Each rule's aggregate is hashed.
_SCRIPT = textwrap.dedent(
    """
    import hashlib, sys
    import torch
    from mcfl_chain.algorithms.robust import make_aggregation_rule
    from mcfl_chain.learning.models import create_model

    def probe(seed):
        g = torch.Generator().manual_seed(seed)
        exponents = torch.randint(-8, 9, (4096,), generator=g)
        return torch.randn(4096, dtype=torch.float64, generator=g) * 10.0**exponents

    torch.set_num_threads(int(sys.argv[1]))
    parent = create_model("lenet5", seed=0).state_dict() | {"probe": probe(0)}
    updates = []
    for i in range(12):
        state = create_model("lenet5", seed=100 + i).state_dict() | {"probe": probe(100 + i)}
        first = next(iter(sorted(state)))
        flat = state[first].view(-1)
        flat[: flat.numel() // 10] = -0.0 if i % 2 else 0.0
        updates.append((1000 - 7 * i, 50 + 13 * i, state))
    if sys.argv[2] == "reversed":
        updates.reverse()
    for name, options in (("median", {}), ("trimmed-mean", {"beta": 0.2}),
                          ("norm-clipping", {})):
        aggregate = make_aggregation_rule(name, **options).aggregate(updates, parent)
        digest = hashlib.sha256()
        for key in sorted(aggregate):
            digest.update(key.encode())
            digest.update(aggregate[key].numpy().tobytes())
        print(name, digest.hexdigest())
    """
)


def _digests(threads: int, order: str) -> dict[str, str]:
    completed = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(threads), order],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    return dict(line.split() for line in completed.stdout.strip().splitlines())


def test_median_trimmed_mean_and_clipping_are_bit_identical_across_processes() -> None:
    # Execute
    first = _digests(1, "forward")
    second = _digests(2, "reversed")

    # Assert: one digest per rule, equal across the processes, and the rules differ.
    assert set(first) == {"median", "trimmed-mean", "norm-clipping"}
    assert first == second
    assert len(set(first.values())) == 3
