"""The optimizer's batch-size rules applied to a config (formulas: scaling.config.optimizer):
the checks before compute, each run's beta2 and weight decay, and the lines `scaling plan` and
`--dry-run` show.

D, the budget in the timescale rule, is the examples a run at that batch size processes over
its budget (Arithmetic.examples; sequences for token tasks, where B / D is the same ratio as in
tokens). A scheduled run keeps the budget of its first batch size, a branch its base's.
"""

from __future__ import annotations

from typing import Any

from scaling.config.arithmetic import for_config
from scaling.config.learning_rates import learning_rates
from scaling.config.names import B2_RULES, OPTIMIZER_TABLE, WEIGHT_DECAY_RULES
from scaling.config.optimizer import (OptimizerConfig, half_life_b2, half_life_examples,
                                      timescale, timescale_weight_decay)
from scaling.config.schema import Config
from scaling.errors import need

TAU_KEYS = ("weight_decay_tau", "weight_decay_ref_batch", "weight_decay_ref_lr")


def validate_rules(cfg: Config) -> None:
    """The rules' keys, each refused in one line naming it (docs/configs.md)."""
    o = cfg.optimizer
    low_high = o.b2_range
    need(len(low_high) == 2 and 0 < low_high[0] <= low_high[1] < 1, "optimizer.b2_range",
         low_high, "[low, high] with 0 < low <= high < 1 (beta2's range under b2_rule)")
    need(o.b2_rule is None or o.b2_rule in B2_RULES, "optimizer.b2_rule", o.b2_rule,
         f"null or one of {', '.join(B2_RULES)}")
    need(o.weight_decay_rule is None or o.weight_decay_rule in WEIGHT_DECAY_RULES,
         "optimizer.weight_decay_rule", o.weight_decay_rule,
         f"null or one of {', '.join(WEIGHT_DECAY_RULES)}")
    if o.b2_rule is None:
        need(o.b2_ref_batch is None, "optimizer.b2_ref_batch", o.b2_ref_batch,
             "null while optimizer.b2_rule is null (or b2_rule: half_life)")
    else:
        _validate_half_life(o, cfg.batch.accumulation)
    if o.weight_decay_rule is None:
        for key in TAU_KEYS:
            need(getattr(o, key) is None, f"optimizer.{key}", getattr(o, key),
                 "null while optimizer.weight_decay_rule is null (or weight_decay_rule: timescale)")
    else:
        _validate_timescale(o, cfg.batch.accumulation)


def _validate_half_life(o: OptimizerConfig, accumulation: int) -> None:
    adaptive = [n for n, f in OPTIMIZER_TABLE.items() if f.adaptive]
    need(OPTIMIZER_TABLE[o.name].adaptive, "optimizer.b2_rule", o.b2_rule,
         f"null for optimizer {o.name}, which has no beta2 (the rule needs {' or '.join(adaptive)})")
    need(o.b2_ref_batch is not None and o.b2_ref_batch > 0, "optimizer.b2_ref_batch",
         o.b2_ref_batch, "a positive batch size with b2_rule: half_life (the batch at which "
         "optimizer.b2 holds)")
    need(o.b2_ref_batch % accumulation == 0, "optimizer.b2_ref_batch", o.b2_ref_batch,
         f"a multiple of batch.accumulation ({accumulation})")
    need(not isinstance(o.b2, list), "optimizer.b2", o.b2,
         "a single number with b2_rule: half_life (beta2 at b2_ref_batch); a list searches "
         "beta2 at every batch size instead, and the analysis sets the best beside the rule")
    need(0 < o.b2 < 1, "optimizer.b2", o.b2, "0 < b2 < 1 with b2_rule: half_life")


def _validate_timescale(o: OptimizerConfig, accumulation: int) -> None:
    usable = [n for n, f in OPTIMIZER_TABLE.items() if f.decay_timescale]
    need(OPTIMIZER_TABLE[o.name].decay_timescale, "optimizer.weight_decay_rule",
         o.weight_decay_rule, f"null for optimizer {o.name}: its weight decay is L2 on the "
         "gradient, which Adam's second moment rescales, so 1 / (eta lambda) is not its "
         f"timescale; the rule needs {', '.join(usable)} (adamw: decoupled decay)")
    need(not isinstance(o.weight_decay, list), "optimizer.weight_decay", o.weight_decay,
         "a single number with weight_decay_rule: timescale (the rule sets each run's); a "
         "list searches the weight decay instead, and the analysis sets the best beside the rule")
    if o.weight_decay_tau is not None:
        need(o.weight_decay_tau > 0, "optimizer.weight_decay_tau", o.weight_decay_tau,
             "a positive timescale (a share of the run: tau = B / (eta lambda D))")
        for key in TAU_KEYS[1:]:
            need(getattr(o, key) is None, f"optimizer.{key}", getattr(o, key),
                 "null while optimizer.weight_decay_tau is given (tau, or a reference run)")
        need(o.weight_decay == 0, "optimizer.weight_decay", o.weight_decay,
             "0 (unset) with optimizer.weight_decay_tau: the rule sets each run's weight decay")
        return
    ref_batch, ref_lr = o.weight_decay_ref_batch, o.weight_decay_ref_lr
    need(ref_batch is not None and ref_batch > 0, "optimizer.weight_decay_ref_batch", ref_batch,
         "a positive batch size, or optimizer.weight_decay_tau (the timescale rule needs tau, "
         "or a reference run: weight_decay_ref_batch, weight_decay_ref_lr and weight_decay)")
    need(ref_batch % accumulation == 0, "optimizer.weight_decay_ref_batch", ref_batch,
         f"a multiple of batch.accumulation ({accumulation})")
    need(ref_lr is not None and ref_lr > 0, "optimizer.weight_decay_ref_lr", ref_lr,
         "a positive learning rate (the reference run's peak learning rate)")
    need(o.weight_decay > 0, "optimizer.weight_decay", o.weight_decay,
         "a positive weight decay (the reference run's) with weight_decay_ref_batch")


def budget_examples(cfg: Config, batch_size: int) -> int:
    """D: the examples a run of `cfg` at `batch_size` processes over its budget."""
    return for_config(cfg, batch_size).examples


def weight_decay_tau(cfg: Config) -> float:
    """The timescale rule's tau: given, or B_ref / (eta_ref lambda_ref D_ref) of the reference."""
    o = cfg.optimizer
    if o.weight_decay_tau is not None:
        return o.weight_decay_tau
    ref = o.weight_decay_ref_batch
    return timescale(ref, o.weight_decay_ref_lr, o.weight_decay, budget_examples(cfg, ref))


def rule_values(cfg: Config, batch_size: int, learning_rate: float,
                examples: int) -> dict[str, float]:
    """The scalars the config's rules set for a run at `batch_size` and peak `learning_rate`
    whose budget is `examples` (D): b2 and/or weight_decay, empty without rules."""
    o, out = cfg.optimizer, {}
    if o.b2_rule == "half_life":
        out["b2"] = half_life_b2(o.b2, batch_size, o.b2_ref_batch, o.b2_range)
    if o.weight_decay_rule == "timescale":
        out["weight_decay"] = timescale_weight_decay(weight_decay_tau(cfg), batch_size,
                                                     learning_rate, examples)
    return out


def plan_rows(cfg: Config) -> list[dict[str, Any]]:
    """Per batch size, what the rules set (`scaling plan`): b2 and its half-life in examples,
    and per learning rate of the batch size the weight decay; empty without rules."""
    o = cfg.optimizer
    if not o.ruled:
        return []
    rows = []
    for size in cfg.batch.sizes:
        examples = budget_examples(cfg, size)
        row: dict[str, Any] = {"batch_size": size, "examples": examples}
        if o.b2_rule is not None:
            b2 = half_life_b2(o.b2, size, o.b2_ref_batch, o.b2_range)
            row.update(b2=b2, b2_half_life=half_life_examples(b2, size),
                       b2_clipped=b2 != o.b2 ** (size / o.b2_ref_batch))
        if o.weight_decay_rule is not None:
            row["weight_decay"] = [
                {"learning_rate": lr, "weight_decay": rule_values(cfg, size, lr, examples)["weight_decay"]}
                for lr in learning_rates(cfg.learning_rate, size)]
        rows.append(row)
    return rows


def describe(cfg: Config) -> list[str]:
    """The rules' lines for `scaling plan` and `--dry-run` (none without rules)."""
    rows, o = plan_rows(cfg), cfg.optimizer
    if not rows:
        return []
    lines = ["optimizer rules:"]
    if o.b2_rule is not None:
        lines.append(f"  b2 by the half_life rule (Marek et al. 2025): {o.b2:.6g} at batch "
                     f"{o.b2_ref_batch}, b2 = {o.b2:.6g} ** (B / {o.b2_ref_batch}), clipped to "
                     f"[{o.b2_range[0]:g}, {o.b2_range[1]:g}]")
        lines += [f"    batch {r['batch_size']}: b2 {r['b2']:.6g}, half-life "
                  f"{r['b2_half_life']:,.0f} examples" + (" (clipped)" if r["b2_clipped"] else "")
                  for r in rows]
    if o.weight_decay_rule is not None:
        lines.append(f"  weight_decay by the timescale rule (Wang & Aitchison 2024): "
                     f"lambda = B / (lr tau D), tau = {weight_decay_tau(cfg):.6g}{_tau_source(o)}")
        lines += [f"    batch {r['batch_size']} (D = {r['examples']:,} examples): " + ", ".join(
            f"lr {w['learning_rate']:.4g} -> {w['weight_decay']:.6g}" for w in r["weight_decay"])
            for r in rows]
    return lines


def _tau_source(o: OptimizerConfig) -> str:
    if o.weight_decay_tau is not None:
        return " (given)"
    return (f" (from the reference run: batch {o.weight_decay_ref_batch}, lr "
            f"{o.weight_decay_ref_lr:.6g}, weight_decay {o.weight_decay:.6g})")
