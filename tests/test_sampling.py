"""The decided decoding rules, held to the worked numbers of the design and reference libraries."""

import numpy as np
import pytest
from decodelab.core.rules import sampling
from decodelab.lesson.playground import probs as probs_from_request

from tests.conftest import decode_distribution


def dist(z, **kw):
    return decode_distribution(np.asarray(z, dtype=float), **kw)


def final(z, **kw):
    return dist(z, **kw)[2]


@pytest.mark.parametrize("T, expected", [(1.0, [0.731, 0.269]), (0.5, [0.881, 0.119]),
                                         (2.0, [0.622, 0.378])])
def test_temperature_on_two_logits(T, expected):
    np.testing.assert_allclose(final([2, 1], temperature=T), expected, atol=5e-4)


def test_temperature_matches_softmax_of_scaled_logits():
    z = np.array([3.0, -1.0, 0.5, 2.0])
    for T in (0.3, 1.0, 1.7):
        e = np.exp(z / T)
        np.testing.assert_allclose(final(z, temperature=T), e / e.sum(), rtol=1e-12)


def test_top_p_keeps_the_crossing_token():
    z = np.log([0.6, 0.25, 0.15])
    np.testing.assert_allclose(final(z, top_p=0.8), [0.706, 0.294, 0], atol=5e-4)


def test_top_p_exactly_reached_does_not_take_one_more():
    # 0.6 + 0.25 reaches 0.85 exactly (up to float rounding): two tokens, not three.
    _, kept, _ = dist(np.log([0.6, 0.25, 0.15]), top_p=0.85)
    assert kept.tolist() == [True, True, False]


def test_order_changes_what_top_p_keeps():
    z = np.log([0.6, 0.25, 0.15])
    np.testing.assert_allclose(final(z, temperature=2, top_p=0.8, order="temperature-first"),
                               [0.466, 0.301, 0.233], atol=5e-4)
    np.testing.assert_allclose(final(z, temperature=2, top_p=0.8, order="filter-first"),
                               [0.608, 0.392, 0], atol=5e-4)


def test_top_k_then_top_p_renormalises_between_filters():
    np.testing.assert_allclose(final(np.log([0.4, 0.3, 0.2, 0.1]), top_k=3, top_p=0.75),
                               [0.571, 0.429, 0, 0], atol=5e-4)


def test_top_k_keeps_ties_with_the_kth():
    np.testing.assert_allclose(final([1, 1, 1, 0], top_k=2), [1 / 3, 1 / 3, 1 / 3, 0], atol=1e-12)


def test_min_p():
    np.testing.assert_allclose(final(np.log([0.5, 0.3, 0.15, 0.05]), min_p=0.2),
                               [0.526, 0.316, 0.158, 0], atol=5e-4)


def test_min_p_order_difference():
    z = np.log([0.6, 0.25, 0.1, 0.05])
    np.testing.assert_allclose(final(z, temperature=2, min_p=0.3), [0.487, 0.314, 0.199, 0],
                               atol=5e-4)
    np.testing.assert_allclose(final(z, temperature=2, min_p=0.3, order="filter-first"),
                               [0.608, 0.392, 0, 0], atol=5e-4)


def test_top_p_ties_ordered_by_token_id():
    _, kept, _ = dist(np.log([0.4, 0.2, 0.2, 0.2]), top_p=0.7)
    assert kept.tolist() == [True, True, True, False]
    _, kept, _ = dist(np.log([0.2, 0.2, 0.2, 0.4]), top_p=0.7)
    assert kept.tolist() == [True, True, False, True]


def test_tiny_top_p_keeps_the_top_token():
    _, kept, p = dist([0.1, 3.0, 0.2], top_p=1e-6)
    assert kept.tolist() == [False, True, False] and p[1] == 1.0


def test_greedy_takes_lowest_id_on_ties_and_ignores_temperature():
    for kw in ({"greedy": True}, {"temperature": 0.0}, {"greedy": True, "temperature": 5.0}):
        _, kept, p = dist([1.0, 3.0, 3.0, 0.0], **kw)
        assert kept.tolist() == [False, True, False, False]
        assert p.tolist() == [0, 1, 0, 0]


def test_repetition_penalty_divides_positive_and_multiplies_negative():
    z = np.array([2.0, -1.0, 0.5])
    seen = np.array([True, True, False])
    np.testing.assert_allclose(sampling.apply_repetition_penalty(z, seen, 2.0), [1, -2, 0.5])
    assert sampling.apply_repetition_penalty(z, seen, 1.0) is z


def test_pick_is_inverse_cdf_in_token_id_order():
    p = np.array([0.2, 0.0, 0.5, 0.3])
    assert sampling.pick(p, 0.0) == 0
    assert sampling.pick(p, 0.19999) == 0
    assert sampling.pick(p, 0.2) == 2  # cumulative 0.2 does not exceed u = 0.2; skip removed id 1
    assert sampling.pick(p, 0.69999) == 2
    assert sampling.pick(p, 0.7) == 3
    assert sampling.pick(p, 0.999999999) == 3


def test_pick_never_returns_a_removed_token_when_the_sum_rounds_low():
    p = np.array([0.3, 0.7 - 1e-15, 0.0])
    assert sampling.pick(p, 1 - 1e-17) == 1


def test_entropy():
    assert sampling.entropy(np.array([1.0, 0.0])) == 0.0
    assert sampling.entropy(np.full(4, 0.25)) == pytest.approx(np.log(4))


def test_playground_matches_the_cli_contract_shape():
    out = probs_from_request({"probs": "0.6,0.25,0.15", "top_p": "0.8"})
    assert out["kept"] == [True, True, False]
    assert out["probs"][2] == 0.0
    np.testing.assert_allclose(out["p_raw"], [0.6, 0.25, 0.15], atol=1e-12)


# --- typical-p: locally typical sampling (transformers' TypicalLogitsWarper) ----------------------
# By hand for [0.4, 0.3, 0.2, 0.1]: H = 1.2799 nats; the surprises -ln p are 0.916, 1.204, 1.609,
# 2.303, so the distances |-ln p - H| are 0.364, 0.076, 0.330, 1.023: the order nearest first is
# ids 1, 2, 0, 3, with running totals 0.3, 0.5, 0.9, 1.


def test_typical_p_keeps_the_tokens_nearest_the_entropy_even_dropping_the_likeliest():
    z = np.log([0.4, 0.3, 0.2, 0.1])
    np.testing.assert_allclose(final(z, typical_p=0.5), [0, 0.6, 0.4, 0], atol=1e-12)
    np.testing.assert_allclose(final(z, typical_p=0.4), [0, 0.6, 0.4, 0], atol=1e-12)  # crossing kept
    np.testing.assert_allclose(final(z, typical_p=0.9), [4 / 9, 3 / 9, 2 / 9, 0], atol=1e-12)
    np.testing.assert_allclose(final(z, typical_p=0.25), [0, 1, 0, 0], atol=1e-12)


def test_typical_p_stage_reports_the_entropy_and_the_crossing_token():
    d = sampling.decide(np.log([0.4, 0.3, 0.2, 0.1]), sampling.Rules(typical_p=0.5))
    stage = d.stages[-1]
    assert stage.kind == "typical_p"
    assert stage.facts["entropy"] == pytest.approx(1.279854, abs=1e-6)
    assert stage.facts["crossing"] == 2 and stage.facts["crossing_rank"] == 2
    assert stage.facts["reached"] == pytest.approx(0.5)


def test_typical_p_keeps_every_tie_of_the_crossing_distance():
    # uniform: every token is exactly as surprising as the entropy, so all tie and all stay
    np.testing.assert_allclose(final([0, 0, 0, 0], typical_p=0.3), [0.25] * 4, atol=1e-12)


def test_typical_p_runs_after_min_p_as_transformers_orders_them():
    d = sampling.decide(np.log([0.4, 0.3, 0.2, 0.1]),
                        sampling.Rules(top_k=3, min_p=0.1, typical_p=0.5))
    assert [s.kind for s in d.stages] == ["temperature", "top_k", "min_p", "typical_p"]
    # after top-k 3 the distribution is [4/9, 3/9, 2/9], H = 1.0609 nats; the distances are
    # 0.250, 0.038, 0.443, so id 1 then id 0 reach 0.5 (7/9): its own entropy, not the model's
    np.testing.assert_allclose(d.p_final, [4 / 7, 3 / 7, 0, 0], atol=1e-12)


def test_typical_p_is_off_at_one_and_ignored_by_greedy():
    z = np.log([0.4, 0.3, 0.2, 0.1])
    assert not sampling.Rules(typical_p=1.0).filtering and sampling.Rules(typical_p=0.9).filtering
    np.testing.assert_allclose(final(z, typical_p=1.0), [0.4, 0.3, 0.2, 0.1], atol=1e-12)
    assert "typical_p" in sampling.GREEDY_IGNORES
    assert final(z, typical_p=0.2, greedy=True).tolist() == [1, 0, 0, 0]
