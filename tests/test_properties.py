"""Property tests on random logits: what must hold for every input, not just the worked examples."""

import numpy as np
from decodelab.core.rules import sampling
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.conftest import decode_distribution

logits = st.lists(st.floats(-30, 30, allow_nan=False, width=64), min_size=2, max_size=40).map(
    np.array)
temperature = st.floats(0.05, 20)
top_k = st.integers(0, 50)
top_p = st.floats(0.001, 1.0)
min_p = st.floats(0.0, 1.0)
order = st.sampled_from(["temperature-first", "filter-first"])


@settings(max_examples=300, deadline=None)
@given(logits, temperature, top_k, top_p, min_p, order)
def test_final_distribution_is_a_distribution_over_a_nonempty_kept_set(z, T, k, p, m, o):
    p_temp, kept, p_final = decode_distribution(z, temperature=T, top_k=k, top_p=p,
                                                         min_p=m, order=o)
    assert kept.any()
    assert abs(p_final.sum() - 1) < 1e-9 and abs(p_temp.sum() - 1) < 1e-9
    assert (p_final[~kept] == 0).all()
    # the greedy token is always kept: every filter keeps the likeliest token (when two tokens
    # tie in probability, ties go by id, so compare probabilities rather than raw logits)
    assert p_temp[kept].max() >= p_temp.max() * (1 - 1e-12)
    if np.sort(z)[-1] - np.sort(z)[-2] > 1e-6:
        assert kept[int(np.argmax(z))]


@settings(max_examples=200, deadline=None)
@given(logits, temperature, st.integers(1, 40), order)
def test_top_k_kept_set_grows_with_k(z, T, k, o):
    small = decode_distribution(z, temperature=T, top_k=k, order=o)[1]
    large = decode_distribution(z, temperature=T, top_k=k + 1, order=o)[1]
    assert (large | small == large).all()  # superset
    p_temp = sampling.softmax(z, T)
    assert small.sum() >= min(k, (p_temp > 0).sum())  # ties can only add tokens


@settings(max_examples=200, deadline=None)
@given(logits, temperature, st.floats(0.01, 0.99), st.floats(0.0, 0.5), order)
def test_top_p_kept_set_grows_with_p(z, T, p, dp, o):
    small = decode_distribution(z, temperature=T, top_p=p, order=o)[1]
    large = decode_distribution(z, temperature=T, top_p=min(1.0, p + dp), order=o)[1]
    assert (large | small == large).all()


@settings(max_examples=200, deadline=None)
@given(logits, temperature, top_k)
def test_top_k_alone_is_order_invariant(z, T, k):
    # Temperature is monotone, so ranking-based top-k keeps the same set in either order.
    a = decode_distribution(z, temperature=T, top_k=k, order="temperature-first")
    b = decode_distribution(z, temperature=T, top_k=k, order="filter-first")
    assert (a[1] == b[1]).all()
    np.testing.assert_allclose(a[2], b[2], atol=1e-12)


@settings(max_examples=200, deadline=None)
@given(logits, top_k, top_p, min_p)
def test_order_is_irrelevant_at_temperature_one(z, k, p, m):
    a = decode_distribution(z, top_k=k, top_p=p, min_p=m, order="temperature-first")
    b = decode_distribution(z, top_k=k, top_p=p, min_p=m, order="filter-first")
    assert (a[1] == b[1]).all()


@settings(max_examples=200, deadline=None)
@given(logits, temperature, st.floats(0.01, 1.0))
def test_top_p_keeps_the_smallest_prefix_reaching_p(z, T, p):
    p_temp, kept, _ = decode_distribution(z, temperature=T, top_p=p)
    mass = p_temp[kept].sum()
    assert mass >= p - 1e-9
    # dropping the least likely kept token would fall short of p
    if kept.sum() > 1:
        assert mass - p_temp[kept].min() < p + 1e-9


@settings(max_examples=200, deadline=None)
@given(logits, temperature, st.floats(0, 1, exclude_max=True))
def test_pick_returns_a_kept_token(z, T, u):
    assume(np.ptp(z) < 60)
    _, kept, p_final = decode_distribution(z, temperature=T, top_k=3)
    assert kept[sampling.pick(p_final, u)]


@settings(max_examples=100, deadline=None)
@given(logits, st.floats(1.01, 10), st.lists(st.booleans(), min_size=40, max_size=40))
def test_repetition_penalty_never_makes_a_seen_token_likelier(z, penalty, seen_list):
    seen = np.array(seen_list[: len(z)])
    zp = sampling.apply_repetition_penalty(z, seen, penalty)
    assert (zp[seen] <= z[seen]).all() and (zp[~seen] == z[~seen]).all()


def typical_as_transformers_writes_it(p, mass):
    """transformers' TypicalLogitsWarper, step by step, on a distribution p (no torch): sort by
    |-log p - H| ascending, count the sorted tokens whose running total is below `mass`, and
    remove every token whose distance is greater than that one's."""
    logp = np.log(p)
    H = -np.nansum(logp * p)
    shifted = np.abs(-logp - H)
    order = np.argsort(shifted, kind="stable")
    running = np.cumsum(p[order])
    last = min(int((running < mass).sum()), len(p) - 1)
    return ~(shifted > shifted[order[last]])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(-8, 8, allow_nan=False), min_size=2, max_size=30).map(np.array),
       st.floats(0.01, 0.99))
def test_typical_p_keeps_what_transformers_keeps(z, mass):
    p = sampling.softmax(z)
    order = np.argsort(np.abs(-np.log(p) - sampling.entropy(p)), kind="stable")
    # away from the boundary, where a rounding of the running total could tip either way
    assume(np.abs(np.cumsum(p[order]) - mass).min() > 1e-9)
    _, kept, p_final = decode_distribution(z, typical_p=mass)
    assert (kept == typical_as_transformers_writes_it(p, mass)).all()
    assert abs(p_final.sum() - 1) < 1e-9 and p[kept].sum() >= mass - 1e-9
