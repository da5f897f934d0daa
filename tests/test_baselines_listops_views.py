"""What LRA's first ListOps pipeline showed a model (hkt/baselines/_listops_views.py) and the rule
on that view (bracketless_rule, issue 60): without closing brackets an expression may parse with
another value, worked out by hand here; the rule answers the value where no other is found, else
the root-operator prior."""

from __future__ import annotations

import pytest
from test_baselines_listops_rules import expression_data, ids

from hkt.baselines._listops_views import another_value, first_view_length, parse
from hkt.baselines.run import run_baseline


def test_the_first_view_drops_the_closing_brackets():
    assert first_view_length(ids("[MAX 2 [MIN 4 7 ] 0 ]")) == 6


@pytest.mark.parametrize("expr, other", [
    # MAX 2 MIN 4 7 0: MIN may take the 0, MAX(2, MIN(4, 7, 0)) = 2, not 4
    ("[MAX 2 [MIN 4 7 ] 0 ]", 2),
    # MIN may give its 9 to SM: SM(MIN(1, 5), 9, 5) = 15 mod 10 = 5, not SM(1, 5) = 6
    ("[SM [MIN 1 5 9 ] 5 ]", 5),
    # no bracket move changes MAX(9, ...): the view fixes the value as far as the moves find
    ("[MAX 9 [MIN 1 2 ] 3 ]", None),
    ("[SM 1 2 ]", None),
])
def test_another_value_of_the_view_worked_by_hand(expr, other):
    assert another_value(ids(expr)) == other


def test_a_moved_subtree_keeps_the_generators_depth_limit():
    """MIN taking SM's subtree puts SM at depth 3: allowed with operators above depth 10, not
    with operators above depth 3; no other move changes MAX(5, 7, 0) = 7."""
    expr = ids("[MAX [MIN 5 6 ] [SM 3 4 ] 0 ]")
    assert another_value(expr) == 5          # MAX(MIN(5, 6, 7), 0)
    assert another_value(expr, max_depth=3) is None


def test_an_operator_keeps_two_to_max_args_arguments():
    """MIN(4, 7) cannot give an argument (it would keep one), nor take one past max_args."""
    assert another_value(ids("[MAX [MIN 4 7 ] 1 ]"), max_args=2) is None
    assert another_value(ids("[MAX [MIN 4 7 ] 1 ]")) is None  # MAX would keep one argument


@pytest.mark.parametrize("expr", ["[MAX 2 3", "[MAX 2 3 ] ]", "4", "[MAX 2 3 ] 4"])
def test_a_malformed_expression_is_a_value_error(expr):
    with pytest.raises(ValueError):
        parse(ids(expr))


def test_the_rule_answers_the_value_where_the_view_fixes_it_else_the_prior(tmp_path):
    train = [("[MAX 9 1 ]", 9), ("[MAX 2 9 ]", 9), ("[SM 0 1 ]", 1)]    # prior: MAX -> 9, SM -> 1
    evaluation = [("[MAX 2 [MIN 4 7 ] 0 ]", 4),   # another value found: the prior, 9 (wrong)
                  ("[MAX 9 [MIN 1 2 ] 3 ]", 9),   # fixed: 9 (right)
                  ("[SM [MIN 1 5 9 ] 5 ]", 6),    # another value found: the prior, 1 (wrong)
                  ("[SM 1 2 ]", 3)]               # fixed: 3 (right)
    data = expression_data(tmp_path / "d", {"train": train, "val": evaluation,
                                            "test": evaluation})
    rec = run_baseline("bracketless_rule", data, tmp_path / "run")
    assert rec["test_accuracy"] == rec["val_accuracy"] == 0.5
    assert rec["other_value_found"] == {"val": 2, "test": 2}
    assert rec["view_tokens"]["test"] == {"min": 3, "max": 6, "mean": 5.25}  # 6, 6, 6, 3
