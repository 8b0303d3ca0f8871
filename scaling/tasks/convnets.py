"""Image networks of the batch-size papers (flax.linen, float32) and on-device augmentation.

Every normalisation here is a pure function of (params, batch): no running averages, no mutable
collections, so the engine can treat a model as it treats the MLP. Batch norm takes its statistics
over fixed-size ghost batches, so that a batch-size sweep does not change the model it measures.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from scaling.errors import need

NORMS = ("group", "layer", "batch", "none")


class GhostBatchNorm(nn.Module):
    """Batch norm with statistics over fixed slices of `ghost_size` examples (Hoffer et al. 2017).

    Input (B, ..., C): each slice is normalised per channel over its examples and all spatial
    axes, then a learnable per-channel scale (init 1) and bias (init 0) are applied. With ordinary
    batch norm an example's output depends on the global batch size, so a batch-size sweep would
    change the model itself; with fixed slices it does not. There are no running averages:
    evaluation too uses slices of the evaluation batch. When B is not a multiple of G, the first
    B - B % G examples form full slices and the remaining B % G examples one smaller slice (a
    batch smaller than G is a single slice).

    References: Hoffer, Hubara & Soudry 2017, "Train longer, generalize better: closing the
    generalization gap in large batch training of neural networks", arXiv 1705.08741.
    """

    ghost_size: int
    epsilon: float = 1e-5

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        channels = x.shape[-1]
        scale = self.param("scale", nn.initializers.ones, (channels,))
        bias = self.param("bias", nn.initializers.zeros, (channels,))
        size = x.shape[0]
        full = size - size % self.ghost_size
        parts = []
        if full:
            slices = x[:full].reshape((full // self.ghost_size, self.ghost_size, *x.shape[1:]))
            parts.append(self._normalise(slices).reshape((full, *x.shape[1:])))
        if size > full:
            parts.append(self._normalise(x[full:][None])[0])
        y = parts[0] if len(parts) == 1 else jnp.concatenate(parts, axis=0)
        return y * scale + bias

    def _normalise(self, slices: jax.Array) -> jax.Array:
        """(S, G, ..., C) -> zero mean, unit (biased) variance per slice and channel; the
        statistics in float32 whatever the input's dtype."""
        axes = tuple(range(1, slices.ndim - 1))
        wide = slices.astype(jnp.float32)
        mean = jnp.mean(wide, axis=axes, keepdims=True)
        var = jnp.var(wide, axis=axes, keepdims=True)
        return ((wide - mean) * jax.lax.rsqrt(var + self.epsilon)).astype(slices.dtype)


def norm_layer(kind: str, ghost_size: int, groups: int) -> Callable[[jax.Array], jax.Array]:
    """A fresh normalisation for input (B, ..., C), created inside the caller's compact method.

    "group": group norm with `groups` groups (Wu & He 2018); "layer": one group, i.e. statistics
    over all of an example's features with a per-channel affine (Wu & He's LN, also right for the
    (B, F) features of a dense layer); "batch": GhostBatchNorm(ghost_size); "none": identity.
    """
    need(kind in NORMS, "norm", kind, f"one of {list(NORMS)}")
    if kind == "group":
        need(groups > 0, "groups", groups, "a positive integer dividing every layer's width")
        return nn.GroupNorm(num_groups=groups)
    if kind == "layer":
        return nn.GroupNorm(num_groups=1)
    if kind == "batch":
        need(ghost_size > 0, "ghost_size", ghost_size, "a positive integer")
        return GhostBatchNorm(ghost_size)
    return lambda x: x


class SimpleCNN(nn.Module):
    """The "Simple CNN" of Shallue et al. for MNIST and Fashion-MNIST; input (B, H, W, C).

    Each of `channels` is a 5x5 convolution (stride 1, SAME padding) with ReLU and 2x2 max pooling
    (stride 2); then fully connected ReLU layers of widths `dense`, then the output layer. The
    defaults, channels (32, 64) and dense (1024,), are the paper's: 3,274,634 parameters for
    28x28x1 inputs and 10 classes. The paper uses no normalisation (norm "none"); with a norm, it
    follows every convolution and hidden dense layer before the ReLU, and replaces their biases.
    (Lee et al. 2021's reimplementation, github.com/namhoonlee/effect-dps-public, differs: VALID
    padding and no hidden layer, dense=(); its 1024 is the 4*4*64 flattened features.)

    References: Shallue, Lee, Antognini, Sohl-Dickstein, Frostig & Dahl 2018, "Measuring the
    Effects of Data Parallelism on Neural Network Training", arXiv 1811.03600 (JMLR 20(112), 2019).
    """

    num_outputs: int
    channels: Sequence[int] = (32, 64)
    dense: Sequence[int] = (1024,)
    norm: str = "none"
    ghost_size: int = 32
    groups: int = 8

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        bias = self.norm == "none"
        for width in self.channels:
            x = nn.Conv(width, (5, 5), padding="SAME", use_bias=bias)(x)
            x = nn.relu(norm_layer(self.norm, self.ghost_size, self.groups)(x))
            x = nn.max_pool(x, (2, 2), strides=(2, 2))
        x = x.reshape((x.shape[0], -1))
        for width in self.dense:
            x = nn.relu(norm_layer(self.norm, self.ghost_size, self.groups)(
                nn.Dense(width, use_bias=bias)(x)))
        return nn.Dense(self.num_outputs)(x)


class ResidualBlock(nn.Module):
    """Basic block of He et al. 2016: conv3x3-norm-ReLU-conv3x3-norm, plus shortcut, then ReLU.

    The shortcut is the identity unless the shape changes (stride 2 or more channels); then it
    is a 1x1 convolution with that stride followed by a norm (He et al.'s option B, a projection;
    their CIFAR runs used option A, zero padding, which has no parameters).
    """

    width: int
    stride: int
    norm: str
    ghost_size: int
    groups: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        bias = self.norm == "none"
        strides = (self.stride, self.stride)
        y = nn.Conv(self.width, (3, 3), strides, padding="SAME", use_bias=bias)(x)
        y = nn.relu(norm_layer(self.norm, self.ghost_size, self.groups)(y))
        y = nn.Conv(self.width, (3, 3), padding="SAME", use_bias=bias)(y)
        y = norm_layer(self.norm, self.ghost_size, self.groups)(y)
        if self.stride != 1 or x.shape[-1] != self.width:
            x = nn.Conv(self.width, (1, 1), strides, use_bias=bias)(x)
            x = norm_layer(self.norm, self.ghost_size, self.groups)(x)
        return nn.relu(x + y)


class ResNet(nn.Module):
    """CIFAR ResNet of depth 6n+2 (He et al. 2016, section 4.2); input (B, H, W, C).

    A 3x3 convolution to widths[0] channels, three stages of `blocks` basic blocks with `widths`
    (16, 32, 64) channels, stride 2 at the start of stages 2 and 3, global average pooling and a
    dense output. Convolutions followed by a norm have no bias. Default norm "group" with 8
    groups: Wu & He's 32 groups do not divide 16 channels, and 8 is the most groups that divide
    16, 32 and 64 and still leave at least 2 channels in each group of the first stage. For
    norm "batch", ghost_size 32 makes every batch size of 32 and up see the same model (a smaller
    batch is a single, smaller slice).

    References: He, Zhang, Ren & Sun 2016, "Deep Residual Learning for Image Recognition",
    CVPR (arXiv 1512.03385); Wu & He 2018, "Group Normalization", ECCV (arXiv 1803.08494).
    """

    num_outputs: int
    blocks: int = 3
    widths: Sequence[int] = (16, 32, 64)
    norm: str = "group"
    ghost_size: int = 32
    groups: int = 8

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        norm = (self.norm, self.ghost_size, self.groups)
        x = nn.Conv(self.widths[0], (3, 3), padding="SAME", use_bias=self.norm == "none")(x)
        x = nn.relu(norm_layer(*norm)(x))
        for stage, width in enumerate(self.widths):
            for block in range(self.blocks):
                x = ResidualBlock(width, 2 if stage and not block else 1, *norm)(x)
        return nn.Dense(self.num_outputs)(jnp.mean(x, axis=(1, 2)))


def resnet(depth: int, num_classes: int, norm: str = "group", ghost_size: int = 32,
           groups: int = 8) -> ResNet:
    """ResNet-`depth` (8, 14, 20, ...: depth = 6n + 2); ConfigError (a ValueError) otherwise."""
    need(depth >= 8 and (depth - 2) % 6 == 0, "depth", depth, "6n+2 for n >= 1 (8, 14, 20, ...)")
    return ResNet(num_classes, (depth - 2) // 6, norm=norm, ghost_size=ghost_size, groups=groups)


def augment(key: jax.Array, images: jax.Array, crop_padding: int, flip: bool) -> jax.Array:
    """Random crops and horizontal flips of (B, H, W, C) images, per example, on device.

    Each example is cropped back to H x W at a uniformly random offset from the image zero-padded
    by `crop_padding` on every side, then flipped along W with probability 1/2. Deterministic in
    the key; `crop_padding` and `flip` are static under jit. With no crop and no flip the input is
    returned unchanged and the key is not used. The key is split the same way either way, so the
    crops for one key do not depend on whether flips are on.
    """
    need(crop_padding >= 0, "crop_padding", crop_padding, "a non-negative integer")
    if crop_padding == 0 and not flip:
        return images
    size, height, width, channels = images.shape
    crop_key, flip_key = jax.random.split(key)
    if crop_padding:
        pad = crop_padding
        padded = jnp.pad(images, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
        offsets = jax.random.randint(crop_key, (size, 2), 0, 2 * pad + 1)
        images = jax.vmap(lambda image, at: jax.lax.dynamic_slice(
            image, (at[0], at[1], 0), (height, width, channels)))(padded, offsets)
    if flip:
        flipped = jax.random.bernoulli(flip_key, 0.5, (size,))
        images = jnp.where(flipped[:, None, None, None], images[:, :, ::-1], images)
    return images
