"""The Chord-correction analysis (PACT Fig. 3b / 6) on hand-made scores."""
import numpy as np

from studies.chord_analysis import correction_by_bin, wrong_pairs


def test_wrong_pairs_and_corrections_hand_made():
    cos_t = np.array([0.5, 0.9])
    cos_d = np.array([[0.6, 0.7, 0.4], [0.95, -np.inf, 0.1]])
    ch_t = np.array([0.8, 0.9])
    ch_d = np.array([[0.7, 0.85, 0.0], [0.99, -np.inf, 0.0]])
    qi, deficit, fixed = wrong_pairs(cos_t, cos_d, ch_t, ch_d)
    assert qi.tolist() == [0, 0, 1]  # 0.6 and 0.7 beat 0.5; 0.95 beats 0.9
    np.testing.assert_allclose(deficit, [0.1, 0.2, 0.05])
    assert fixed.tolist() == [True, False, False]


def test_correction_by_bin_rates_and_intervals():
    rng = np.random.default_rng(0)
    qi = np.repeat(np.arange(200), 3)
    deficit = rng.random(600)
    fixed = rng.random(600) < (1 - deficit)  # small deficits are corrected more often
    rows = correction_by_bin(qi, deficit, fixed, np.array([0, 0.5, 1.0001]), n_boot=500)
    assert [r["pairs"] for r in rows] == [int((deficit < 0.5).sum()), int((deficit >= 0.5).sum())]
    assert rows[0]["rate"] > rows[1]["rate"]
    for r in rows:
        assert r["ci95"][0] <= r["rate"] <= r["ci95"][1]
