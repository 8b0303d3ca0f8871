"""The report's first screen: B_crit as an estimate or the bound it is, with what its interval
resamples, and the learning-rate sentence read from hand-built rule tables (through
contract.filled, as the report reads analysis.json)."""

from scaling.analysis import contract
from scaling.analysis.sections import LRRules
from scaling.report import answer

SEEDS = {"resamples": "seeds", "method": "jackknife", "level": 0.95, "replicates": 3,
         "why": None}


def _rows(ratios: dict[int, float], cost: float = 1.0) -> list[dict]:
    return [{"batch_size": b, "ratio_to_optimum": r, "relative_cost": cost, "note": None}
            for b, r in ratios.items()]


def _rules() -> dict:
    """Optima rise linearly to B = 128 and then stay at 0.8: the linear rule is 2x high at 256
    (the limit, still holding) and 4x at 512; sqrt gives 0.1 x sqrt(B / 16), 2.8x low at 128."""
    lrs = {16: 0.1, 32: 0.2, 64: 0.4, 128: 0.8, 256: 0.8, 512: 0.8}
    optima = [{"batch_size": b, "learning_rate": lr} for b, lr in lrs.items()]
    linear = _rows({b: 0.1 * b / 16 / lr for b, lr in lrs.items()})
    sqrt = _rows({b: 0.1 * (b / 16) ** 0.5 / lr for b, lr in lrs.items()})
    return contract.filled({"target": "eval_loss<=1.0", "optima": optima,
                            "rules": {"linear": linear, "sqrt": sqrt}}, LRRules)


def test_the_rule_that_holds_longest_and_where_it_stops():
    text = answer.lr_sentence(_rules())
    assert text.startswith("Learning rate (at eval_loss<=1.0): linear scaling from B = 16 "
                           "stays within 2x of the measured optimum")
    assert "up to B = 256; past B = 256 the optimum is 0.8;" in text
    assert text.endswith("sqrt scaling is up to 2.8x low (B = 128).")


def test_a_rule_costing_too_many_steps_stops_holding_there():
    rules = _rules()
    rules["rules"]["linear"][1]["relative_cost"] = 1.6  # within 2x in rate, 1.6x the steps
    assert answer._holds(rules["rules"]["linear"]) == 16
    assert answer._holds(rules["rules"]["sqrt"]) == 64
    assert "sqrt scaling from B = 16 stays within 2x of the measured optimum (and 1.5x the best " \
        "steps) up to B = 64; past B = 64 the optimum is 0.8;" in answer.lr_sentence(rules)


def test_b_crit_prints_as_a_bound_where_the_runs_do_not_place_it():
    status = {"identified": False, "bound": "lower", "at": 4096, "why": "beyond the batch "
              "sizes fitted", "range": [16, 4096], "ci_open": [False, True],
              "ci_zero_width": False}
    t = {"name": "eval_loss<=0.7", "b_crit": 9000.0, "b_crit_ci": [3000.0, 9e9],
         "s_min": 40.0, "e_min": 360000.0, "interval": SEEDS, "regimes": {},
         "fit": {"identification": status, "interval": SEEDS, "s_min_ci": [30.0, 50.0],
                 "e_min_ci": [3e5, 4e5]}}
    table = "\n".join(answer.section(contract.filled({"targets": [t]})))
    assert "| eval_loss<=0.7 | > 4,096 | 95% over seeds (jackknife, 3 replicates) | " \
           "40 [30, 50] | 360,000 [300,000, 400,000] |" in table
    assert "9,000" not in table


def test_one_seed_says_there_is_no_interval():
    none = {"resamples": "none", "method": None, "level": 0.95, "replicates": 0,
            "why": "one seed"}
    t = {"name": "eval_loss<=1.0", "b_crit": 410.0, "b_crit_ci": None, "s_min": 25.0,
         "e_min": 10250.0, "interval": none, "regimes": {"perfect_scaling_until": 128},
         "fit": {"identification": {"identified": True}, "interval": none}}
    row = answer.section(contract.filled({"targets": [t]}))[4]
    assert row == "| eval_loss<=1.0 | 410 | no interval (one seed) | 25 | 10,250 | 128 |"


def test_no_fixed_rule_past_the_first_batch_names_every_rule():
    rules = _rules()
    for name in ("linear", "sqrt"):
        rules["rules"][name][1]["ratio_to_optimum"] = 3.0
    text = answer.lr_sentence(rules)
    assert text == ("Learning rate (at eval_loss<=1.0): no fixed rule from B = 16 stays within "
                    "2x of the measured optimum past it; past B = 16 the optimum is 0.2-0.8; "
                    "linear scaling is up to 4x high (B = 512); sqrt scaling is up to 3x high "
                    "(B = 32).")


def test_a_fit_parameter_pushed_to_zero_prints_at_its_bound():
    """adam_surge's easiest target: about 15 steps at every batch size, E_min fits to 5e-15
    (B_crit '< 4'); steps that keep halving push S_min to zero instead."""
    points = [{"batch_size": b, "steps": s} for b, s in ((4, 15.0), (16, 14.5), (64, 14.6))]
    flat = contract.filled({"points": points, "s_min": 14.5, "e_min": 5.02e-15}, contract.Target)
    assert answer.e_min_text(flat) == "≈ 0 (at its bound)" and answer.s_min_text(flat) == "14.5"
    halving = contract.filled({"points": points, "s_min": 1.29e-13, "e_min": 5612.0},
                              contract.Target)
    assert answer.s_min_text(halving) == "≈ 0 (at its bound)"
    assert answer.e_min_text(halving) == "5,612"


def test_a_fit_parameter_whose_interval_spans_over_1000x_prints_no_ends():
    """The quickstart from neighbours at eval_loss<=1.2 before its lattice fix: S_min 0.129
    [2.51e-11, 6.66e8], E_min 154 [2.81e-7, 8.45e10]; ends that far apart pin nothing, so the
    report says so instead of printing them. 1,000x exactly still prints its ends."""
    points = [{"batch_size": b, "steps": s} for b, s in ((16, 692.0), (4096, 31.0))]
    wild = {"points": points, "s_min": 0.129, "e_min": 154.0,
            "fit": {"s_min_ci": [2.51e-11, 6.66e8], "e_min_ci": [2.81e-7, 8.45e10]}}
    edge = contract.filled({**wild, "fit": {"s_min_ci": [0.01, 10.0]}}, contract.Target)
    wild = contract.filled(wild, contract.Target)
    assert answer.s_min_text(wild) == "0.129 [interval over 1,000x wide]"
    assert answer.e_min_text(wild) == "154 [interval over 1,000x wide]"
    assert answer.s_min_text(edge) == "0.129 [0.01, 10]"
