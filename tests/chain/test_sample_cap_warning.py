"""The warning `mcfl-chain deploy` prints when no --max-samples is given."""

from mcfl_chain.cli.deploy import sample_cap_warning


def test_the_warning_says_what_the_default_cap_allows_and_suggests_a_fitted_one():
    # Execute
    known = sample_cap_warning(60_000, 3)
    unknown = sample_cap_warning(None, 3)
    # Assert
    assert "default 1,000,000 samples" in known and "weighs 0.9994" in known
    assert known.endswith("none holds more than --max-samples 20000.")
    assert unknown.endswith("the largest local training set one trainer holds.")
