"""Repacking a group at chunk boundaries: fewer runs in the state, the same results for each run."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from scaling.train.mesh import make_mesh
from scaling.train import repack
from scaling.train.repack import PAD, Packing, width_for
from scaling.train.spec import RunSpec
from tests.helpers import config, train_program

# Momentum on the NQM (h_max = 1): the large rates diverge within a few steps, the middle ones
# reach the target at different times, the smallest uses its whole budget. Shuffled, so the
# runs still running are not the first slots of the group.
RATES = [12.0, 0.3, 6.0, 0.003, 1.5, 0.1, 0.6, 0.03]


REPACK = {
    "task": {"name": "nqm", "dim": 20}, "optimizer": {"name": "momentum"},
    "batch": {"sizes": [8]}, "learning_rate": {"values": [0.3]},
    "budget": {"max_steps": 200}, "eval": {"every": 5, "points_per_decade": 0},
    "targets": ["eval_loss<=0.3"], "reached": {"rule": "first"},
    "train": {"chunk_steps": 10}}


def train_packed(repack: bool | str, runs: list[RunSpec], runs_axis: int = 1, **kwargs):
    """One group on a (runs_axis, 8 / runs_axis) mesh; (results, per-run rows, program)."""
    cfg = config(REPACK, f"train.repack={str(repack).lower()}")
    return train_program(cfg, runs, make_mesh(runs_axis, 8 // runs_axis, jax.devices()), runs_axis,
                         **kwargs)


def assert_same_runs(a, b) -> None:
    """Same status, steps and rows. XLA may order a reduction differently at another width; the
    noise-scale estimates subtract O(1) squared norms, so they also get an absolute 1e-8."""
    (res_a, rec_a, _), (res_b, rec_b, _) = a, b
    assert [(r.status, r.steps) for r in res_a] == \
        [(r.status, r.steps) for r in res_b]
    for rows_a, rows_b in zip(rec_a, rec_b):
        assert [r["step"] for r in rows_a] == [r["step"] for r in rows_b]
        for key in rows_a[0]:
            np.testing.assert_allclose([r[key] for r in rows_a], [r[key] for r in rows_b],
                                       rtol=1e-6, atol=1e-8, err_msg=key)


@pytest.mark.devices(8)
def test_repacking_changes_no_run_and_shrinks_the_group():
    runs = [RunSpec(lr, seed, momentum=0.5) for seed, lr in enumerate(RATES)]
    on, off = train_packed(True, runs), train_packed(False, runs)
    assert {r.status for r in on[0]} == {"completed", "diverged", "budget_exhausted"}
    assert len({r.steps for r in on[0]}) >= 5  # runs stop at very different times
    assert_same_runs(on, off)
    assert off[2].chunks_at == {8: 20}
    widths = on[2].chunks_at
    assert set(widths) == {8, 4, 2, 1} and sum(widths.values()) == 20
    assert sum(w * n for w, n in widths.items()) < 8 * 20 / 2


def _compiled_at(widths: list[int], compile_s: float):
    """A `before` hook: the chunk compiled ahead at each width, each compile on record as
    taking `compile_s` seconds."""
    def before(program, data, eval_data) -> None:
        for width in widths:
            program.compile_ahead(width, data, eval_data)
            program.compile_s[program.compile_key(width, data)] = compile_s
    return before


@pytest.mark.devices(8)
def test_auto_cuts_where_the_compile_pays_and_where_the_width_is_compiled():
    runs = [RunSpec(lr, seed, momentum=0.5) for seed, lr in enumerate(RATES)]
    off = train_packed(False, runs)
    # A compile on record as taking longer than the whole group: no cut pays for it.
    dear = train_packed("auto", runs, before=_compiled_at([8], 1e9))
    assert dear[2].chunks_at == {8: 20}
    # The narrower widths compiled already: each cut is free, so auto cuts as true does.
    free = train_packed("auto", runs, before=_compiled_at([8, 4, 2, 1], 1e9))
    assert set(free[2].chunks_at) == {8, 4, 2, 1} and sum(free[2].chunks_at.values()) == 20
    assert_same_runs(dear, off)
    assert_same_runs(free, off)


@pytest.mark.devices(8)
def test_auto_starts_a_group_at_a_wider_width_compiled_already():
    runs = [RunSpec(lr, seed, momentum=0.5) for seed, lr in enumerate(RATES[:5])]
    compiled = _compiled_at([8], 1e9)

    def before(program, data, eval_data) -> None:
        compiled(program, data, eval_data)
        program.chunks_at[8] = 1  # as if an earlier group trained there
        program.slot_s = 1e-9  # and took no time: padding costs nothing

    padded = train_packed("auto", runs, before=before)
    assert padded[2].chunks_at == {8: 21}  # 5 runs and 3 padding copies, never cut
    assert_same_runs(padded, train_packed(False, runs))


def test_a_new_group_pads_to_a_compiled_width_where_that_costs_less_than_a_compile():
    # 3 slots, widths 8 and 4 trained at: 1 slot added x 0.01 s x 10 chunks = 0.1 s of padding
    assert repack.start_width(3, [8, 4], 0.01, 10, compile_s=0.2) == 4
    assert repack.start_width(3, [8, 4], 0.01, 10, compile_s=0.05) == 3
    assert repack.start_width(4, [8, 4], 0.01, 10, compile_s=1.0) == 4  # its own, trained at
    assert repack.start_width(3, [2], 0.01, 10, compile_s=1.0) == 3  # none wider
    assert repack.start_width(3, [8], None, 10, compile_s=1.0) == 3  # no chunk timed yet


def test_a_cut_pays_where_the_seconds_saved_exceed_the_compile():
    # 10 chunks left, 0.01 s a slot a chunk, 8 -> 2 slots: 10 x 0.01 x 6 = 0.6 s saved
    assert repack.cut_pays(8, 2, 0.01, 10, compile_s=0.5)
    assert not repack.cut_pays(8, 2, 0.01, 10, compile_s=0.7)
    assert not repack.cut_pays(8, 4, 0.01, 10, compile_s=0.5)  # 0.4 s saved


@pytest.mark.devices(8)
def test_repacking_on_a_2x4_mesh_keeps_the_width_a_multiple_of_the_runs_axis():
    runs = [RunSpec(lr, seed, momentum=0.5) for seed, lr in enumerate(RATES[1:])]  # 7: one pad
    on, off = train_packed(True, runs, runs_axis=2), train_packed(False, runs, runs_axis=2)
    assert_same_runs(on, off)
    assert set(off[2].chunks_at) == {8}  # 7 runs and one padding copy
    assert min(on[2].chunks_at) == 2 and all(w % 2 == 0 for w in on[2].chunks_at)
    assert sum(on[2].chunks_at.values()) == sum(off[2].chunks_at.values())


def test_width_is_the_runs_axis_times_a_power_of_two():
    assert [width_for(n, 1) for n in (1, 2, 3, 5, 8, 9)] == [1, 2, 4, 8, 8, 16]
    assert [width_for(n, 2) for n in (1, 2, 3, 5)] == [2, 2, 4, 8]
    assert width_for(4, 3) == 6


def test_packing_cuts_only_to_half_or_less_and_keeps_packed_out_facts():
    packing = Packing(num_runs=5, width=6, enabled=True, runs_axis=2)
    assert packing.plan() is None  # all running
    packing.update(np.array([True, False, True, False, True, False]), packing.slots)
    assert packing.plan() is None  # 3 running need width 4 > 6 / 2
    packing.update(np.array([True, False, False, False, False, False]), packing.slots)
    take, pad = packing.plan()
    assert take.tolist() == [0, 0] and pad.tolist() == [False, True]
    old = {"steps": np.array([10, 3, 7, 4, 5, 5])}
    packing.repacked(take, pad, old)
    assert packing.slots.tolist() == [0, PAD]
    final = packing.final({"steps": np.array([20, 20])})
    assert final["steps"].tolist() == [20, 3, 7, 4, 5]
    assert Packing(5, 6, enabled=False, runs_axis=2).plan() is None
