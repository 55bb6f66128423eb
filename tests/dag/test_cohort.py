"""The cohort draw (PROTOCOL §4): a Bernoulli draw per trainer and round at the share."""

from mcfl_chain.dag.cohort import cohort_of, drawn_in, next_draw

SEED = bytes.fromhex("5e" * 32)


def test_the_draw_has_the_share_it_is_deployed_with():
    # 4,000 (trainer, round) pairs: a quarter drawn, within four standard deviations
    draws = [drawn_in(SEED, t, r, 2_500) for t in range(1, 101) for r in range(40)]
    assert abs(sum(draws) / len(draws) - 0.25) < 4 * (0.25 * 0.75 / len(draws)) ** 0.5


def test_everyone_is_drawn_without_cohorts():
    assert all(drawn_in(SEED, t, r, 10_000) for t in range(1, 20) for r in range(20))


def test_the_next_draw_is_the_first_round_drawn_from_the_given_one():
    for trainer in range(1, 30):
        first = next_draw(SEED, trainer, 7, 1_000)
        assert first >= 7 and drawn_in(SEED, trainer, first, 1_000)
        assert not any(drawn_in(SEED, trainer, r, 1_000) for r in range(7, first))


def test_another_seed_draws_other_cohorts():
    other = bytes.fromhex("a1" * 32)
    mine = [drawn_in(SEED, t, 3, 5_000) for t in range(1, 200)]
    assert mine != [drawn_in(other, t, 3, 5_000) for t in range(1, 200)]


def test_a_rounds_cohort_is_every_id_drawn_for_it():
    cohort = cohort_of(SEED, 5, 3_000, 200)
    assert cohort == {t for t in range(1, 201) if drawn_in(SEED, t, 5, 3_000)}
    assert 0 < len(cohort) < 200 and cohort != cohort_of(SEED, 6, 3_000, 200)
