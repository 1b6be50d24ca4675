"""The study's pooled noise: what a decision's first looks stand on."""

from __future__ import annotations

import random

from fitspeed.core.sequential import pooled_noise


def test_three_baselines_two_of_them_equal_keep_the_third_s_spread() -> None:
    # log figures of three screen baselines (1004, 1037, 1003 samples/s): the median is one of them,
    # so one residual is 0 by construction; the spread is the 3% of the odd one out, not clipped away
    noise = pooled_noise([[0.0, 0.0324, -0.001]])
    assert noise is not None and noise.df == 2
    assert noise.sd > 0.02, noise


def test_a_handful_of_gaussian_residuals_is_rarely_taken_for_no_noise() -> None:
    # a sample sd with 2 degrees of freedom is below a quarter of the truth 6% of the time;
    # a clip by the median residual of three values made it 13%
    rng = random.Random(20261123)
    runs = 4000
    low = sum(pooled_noise([[rng.gauss(0, 0.13) for _ in range(3)]]).sd < 0.25 * 0.13  # type: ignore[union-attr]
              for _ in range(runs))
    assert low / runs < 0.09


def test_many_residuals_still_clip_a_starved_trial() -> None:
    rng = random.Random(7)
    calm = [rng.gauss(0, 0.1) for _ in range(20)]
    starved = pooled_noise([calm + [-0.7]])
    unclipped = (sum((x - sorted(calm + [-0.7])[10]) ** 2 for x in calm + [-0.7]) / 20) ** 0.5
    assert starved is not None and starved.sd < unclipped


def test_the_claim_s_estimate_is_median_unbiased_where_the_stopping_rule_biases_the_estimate_at_the_stop() -> None:
    # a true 1.2x at a paired noise of 0.14, decided by the verification's design: it stops on lucky runs, so the
    # Huber estimate at the stop lies above the truth about 2 times in 3; the median-unbiased one about half the time
    import math

    from fitspeed.core.sequential import Noise, median_unbiased, step
    from fitspeed.search.decider import verify_design

    design, prior, true = verify_design(5, 0.05, 1), Noise(0.14, 60), 1.2
    rng = random.Random(1)
    above_unbiased = above_at_stop = claims = 0
    for _ in range(200):
        ratios: list[float] = []
        result = step(ratios, design, prior)
        while result.verdict is None:
            ratios.append(math.exp(rng.gauss(math.log(true), 0.14)))
            result = step(ratios, design, prior)
        if result.verdict == "faster" and result.ratio and result.noise:
            claims += 1
            above_unbiased += median_unbiased(design, result.pairs, result.ratio, result.noise, prior.df,
                                              paths=5000) > true
            above_at_stop += result.ratio > true
    assert claims > 170
    assert 0.42 < above_unbiased / claims < 0.62, above_unbiased / claims
    assert above_at_stop > above_unbiased + 0.05 * claims


def _no_prior_decisions(true: float, sd: float, runs: int, seed: int) -> list[str]:
    """`fitspeed doctor`'s confirmation, run to its verdict `runs` times on Gaussian pairs of log sd `sd`."""
    import math

    from fitspeed.core.sequential import step
    from fitspeed.measure.doctor import confirm_design

    design, rng, verdicts = confirm_design(), random.Random(seed), []
    for _ in range(runs):
        ratios: list[float] = []
        result = step(ratios, design)
        while result.verdict is None:
            ratios.append(math.exp(rng.gauss(math.log(true), sd)))
            result = step(ratios, design)
        verdicts.append(str(result.verdict))
    return verdicts


def test_a_decision_with_no_prior_sees_a_noisy_1_5x_and_holds_its_level() -> None:
    # pairs whose log ratio scatters by 0.3 (a fix 3x noisier than the unchanged side): one constant boundary on
    # t over looks 3..10 (4.9, set by the first look's 2 degrees of freedom) saw a true 1.5x about half the time;
    # a boundary for each look at one nominal level sees it nearly always, and still claims at most 2.5% in A/A
    from fitspeed.core.sequential import pocock_p, pocock_t

    per_look = pocock_p(0.025, 3, 10)
    assert per_look[9] < 3.3 < pocock_t(0.025, 3, 10, 0)
    big = _no_prior_decisions(1.5, 0.3, 300, seed=1)
    assert big.count("faster") / len(big) >= 0.8
    null = _no_prior_decisions(1.0, 0.3, 1500, seed=2)
    assert null.count("faster") <= 50  # 2.5% of 1,500 is 37.5; 50 or more has a chance of about 2% at 2.5%
