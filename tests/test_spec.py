"""scaling.train.spec: the evaluation points of a run."""

from __future__ import annotations

from scaling.train.spec import eval_steps


def test_eval_points_are_geometric_plus_cadence():
    points = eval_steps(1000, 250, 20)
    assert points[0] == 0 and points[-1] == 1000
    assert {250, 500, 750} <= set(points)
    assert len([p for p in points if 10 <= p <= 100]) >= 20
