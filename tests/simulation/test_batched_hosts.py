"""How the batched engine cuts a network's trainers into host processes."""

from mcfl_chain.simulation.engines.batched import default_hosts, host_shares


def test_host_shares_are_near_equal_contiguous_and_never_empty() -> None:
    shares = host_shares(38, 4)
    assert [len(s) for s in shares] == [9, 10, 9, 10]
    assert [i for s in shares for i in s] == list(range(38))
    assert host_shares(3, 8) == [range(0, 1), range(1, 2), range(2, 3)]
    assert host_shares(5, 0) == [range(0, 5)]


def test_a_host_per_core_on_the_cpu_and_per_four_cores_on_a_gpu() -> None:
    assert default_hosts(2, on_cpu=True) == 2
    assert default_hosts(16, on_cpu=False) == 4
    assert default_hosts(2, on_cpu=False) == 1
