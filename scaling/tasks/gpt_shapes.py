"""The GPT family's shapes without jax: presets by name, the options' values and the parameter
count, read by the config's loader (a preset resolved to its sizes) and by the model itself."""

from __future__ import annotations

# (d_model, num_layers, num_heads)
PRESETS: dict[str, tuple[int, int, int]] = {
    "14m": (128, 6, 4),      # Pythia-14M
    "70m": (512, 6, 8),      # Pythia-70M
    "124m": (768, 12, 12),   # GPT-2 small
    "160m": (768, 12, 12),   # Pythia-160M's shape (its count is with untied embeddings)
    "350m": (1024, 24, 16),  # GPT-2 medium
    "410m": (1024, 24, 16),  # Pythia-410M's shape (likewise)
    "1b": (2048, 16, 8),     # Pythia-1B
}
POSITIONS = ("rotary", "learned")
REMAT = ("none", "full", "dots")  # none; recompute each block; keep its matmuls' outputs


def param_counts(vocab: int, d_model: int, num_layers: int, max_len: int, positions: str
                 ) -> dict[str, int]:
    """N with and without the embeddings (the tied token embedding, learned positions):
    N = V d (+ T d learned positions) + L (12 d^2 + 2 d) + d."""
    embedding = vocab * d_model + (max_len * d_model if positions == "learned" else 0)
    rest = num_layers * (12 * d_model ** 2 + 2 * d_model) + d_model
    return {"params": embedding + rest, "params_non_embedding": rest}
