"""Image networks, ghost batch norm and augmentation (scaling.tasks.convnets), on tiny inputs."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scaling.tasks.convnets import GhostBatchNorm, ResNet, SimpleCNN, augment, resnet
from scaling.tasks.models import cross_entropy

G = 4  # ghost size in the batch-norm tests


def shapes(model, input_shape):
    """(parameter tree, output) as shapes only: jax.eval_shape builds nothing, so it is fast."""
    x = jax.ShapeDtypeStruct(input_shape, jnp.float32)
    variables = jax.eval_shape(model.init, jax.random.key(0), x)
    return variables, jax.eval_shape(model.apply, variables, x)


def num_params(variables) -> int:
    return sum(int(np.prod(leaf.shape)) for leaf in jax.tree_util.tree_leaves(variables))


def numpy_init(model, input_shape, seed=0):
    """Random parameters drawn in numpy (normal, std 1/sqrt(fan-in)) for the model's shapes.

    jax's PRNG is slow to compile on a small CPU and the tests need values, not flax's exact
    initialisers; the scales and biases of the norms are random too, so they are exercised.
    """
    rng = np.random.default_rng(seed)
    variables = shapes(model, input_shape)[0]
    return jax.tree_util.tree_map(lambda leaf: jnp.asarray(rng.normal(
        0.0, 1.0 / np.sqrt(np.prod(leaf.shape[:-1], initial=1)), leaf.shape), jnp.float32),
        variables)


# ---------------------------------------------------------------- shapes and parameter counts


def test_output_shapes():
    assert shapes(SimpleCNN(10), (3, 28, 28, 1))[1].shape == (3, 10)
    for depth in (8, 20):
        variables, out = shapes(resnet(depth, 10), (3, 32, 32, 3))
        assert out.shape == (3, 10) and out.dtype == jnp.float32
        assert set(variables) == {"params"}  # no batch_stats or other mutable collections


def test_simple_cnn_parameter_count():
    # 28x28 -> 14x14 -> 7x7 ("SAME" 5x5 convolutions, 2x2 pooling), so the dense layer sees
    # 7*7*64 = 3136 features.
    #   conv1   5*5*1*32 + 32      =       832
    #   conv2   5*5*32*64 + 64     =    51,264
    #   dense   3136*1024 + 1024   = 3,212,288
    #   output  1024*10 + 10       =    10,250
    #   total                        3,274,634
    assert num_params(shapes(SimpleCNN(10), (1, 28, 28, 1))[0]) == 3_274_634
    # With a norm the three biases (32 + 64 + 1024 = 1120) become norms with a scale and a
    # bias each (2 * 1120): 3,274,634 - 1120 + 2240 = 3,275,754.
    assert num_params(shapes(SimpleCNN(10, norm="layer"), (1, 28, 28, 1))[0]) == 3_275_754


def test_resnet_parameter_counts():
    # Convolutions followed by a norm have no bias; every norm has a scale and a bias per channel.
    #   stem         3*3*3*16 + norm 2*16                                    =    464
    #   stage 1 block (16 -> 16): 2 * (3*3*16*16 + 2*16) = 2 * (2304 + 32)    =  4,672
    #   stage 2 first (16 -> 32, stride 2, projection):
    #                3*3*16*32 + 64 + 3*3*32*32 + 64 + 1*1*16*32 + 64
    #                = 4608 + 64 + 9216 + 64 + 512 + 64                      = 14,528
    #   stage 2 other: 2 * (9216 + 64)                                        = 18,560
    #   stage 3 first (32 -> 64): 18432 + 128 + 36864 + 128 + 2048 + 128     = 57,728
    #   stage 3 other: 2 * (36864 + 128)                                      = 73,984
    #   head         64*10 + 10                                               =    650
    # ResNet-8  (n=1): 464 + 4672 + 14528 + 57728 + 650                        = 78,042
    # ResNet-20 (n=3): 464 + 3*4672 + 14528 + 2*18560 + 57728 + 2*73984 + 650 = 272,474
    image = (1, 32, 32, 3)
    assert num_params(shapes(resnet(8, 10), image)[0]) == 78_042
    assert num_params(shapes(resnet(20, 10), image)[0]) == 272_474
    # Ghost batch norm has the same parameters as group norm.
    assert num_params(shapes(resnet(20, 10, norm="batch"), image)[0]) == 272_474
    # Without norms each norm's 2C parameters become a conv bias of C. ResNet-8's norms have
    # C = 16 (stem) + 2*16 + 3*32 + 3*64 = 336 in all: 78,042 - 336 = 77,706.
    assert num_params(shapes(resnet(8, 10, norm="none"), image)[0]) == 77_706


@pytest.mark.parametrize("depth", [10, 2, 0, 21])
def test_resnet_depth_must_be_6n_plus_2(depth):
    with pytest.raises(ValueError, match=f"depth: got {depth}"):
        resnet(depth, 10)


def test_unknown_norm_is_rejected():
    with pytest.raises(ValueError, match="norm: got 'batchnorm'"):
        shapes(ResNet(10, blocks=1, norm="batchnorm"), (1, 8, 8, 3))


# ---------------------------------------------------------------- ghost batch norm


def gbn(channels=3):
    """A GhostBatchNorm with random (not init) scale and bias, and its jitted apply."""
    module = GhostBatchNorm(G)
    rng = np.random.default_rng(0)
    params = {"scale": jnp.asarray(1 + rng.normal(size=channels), jnp.float32),
              "bias": jnp.asarray(rng.normal(size=channels), jnp.float32)}
    return params, jax.jit(lambda x: module.apply({"params": params}, x))


def images(n, seed=1, shape=(5, 5, 3)):
    """Inputs far from normalised (mean 2, std 3), so the normalisation has work to do."""
    return jnp.asarray(2.0 + 3.0 * np.random.default_rng(seed).normal(size=(n, *shape)),
                       jnp.float32)


def test_ghost_batch_norm_only_has_params():
    variables = GhostBatchNorm(G).init(jax.random.key(0), images(2 * G))
    assert set(variables) == {"params"}
    np.testing.assert_array_equal(variables["params"]["scale"], np.ones(3))
    np.testing.assert_array_equal(variables["params"]["bias"], np.zeros(3))


def test_ghost_batch_norm_is_the_same_at_every_batch_size():
    """(a) a batch of 4G gives what each G-slice gives on its own: B and 4B use one slice size."""
    _, apply = gbn()
    x = images(4 * G)
    whole = apply(x)
    for i in range(4):
        np.testing.assert_allclose(whole[i * G:(i + 1) * G], apply(x[i * G:(i + 1) * G]),
                                   rtol=1e-5, atol=1e-5)


def test_ghost_batch_norm_normalises_each_slice_at_init():
    """(b) at init each slice has per-channel mean 0 and variance 1 (over examples and space)."""
    module = GhostBatchNorm(G)
    x = images(3 * G)
    y = module.apply(module.init(jax.random.key(0), x), x)
    for i in range(3):
        part = np.asarray(y[i * G:(i + 1) * G]).reshape(-1, 3)
        np.testing.assert_allclose(part.mean(axis=0), 0.0, atol=1e-5)
        np.testing.assert_allclose(part.var(axis=0), 1.0, rtol=1e-3)


def reference(x, params, slices):
    """Batch norm in numpy over the given (start, stop) slices of the batch."""
    x, out = np.asarray(x, np.float64), []
    for start, stop in slices:
        part = x[start:stop].reshape(stop - start, -1, x.shape[-1])
        mean, var = part.mean(axis=(0, 1)), part.var(axis=(0, 1))
        out.append((x[start:stop] - mean) / np.sqrt(var + 1e-5))
    return np.concatenate(out) * np.asarray(params["scale"]) + np.asarray(params["bias"])


def test_ghost_batch_norm_remainder_is_one_smaller_slice():
    """(c) B = 2G + 3: two full slices, then the last 3 examples as one slice of their own."""
    params, apply = gbn()
    x = images(2 * G + 3)
    y = apply(x)
    np.testing.assert_allclose(y, reference(x, params, [(0, G), (G, 2 * G), (2 * G, 2 * G + 3)]),
                               rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(y[2 * G:], apply(x[2 * G:]), rtol=1e-5, atol=1e-5)
    # a batch smaller than G is a single slice
    np.testing.assert_allclose(apply(x[:3]), reference(x[:3], params, [(0, 3)]),
                               rtol=1e-4, atol=1e-4)


def test_ghost_batch_norm_changes_only_the_changed_slice():
    """(d) changing example 5 (slice 1) changes slice 1's outputs and nothing else, exactly."""
    _, apply = gbn()
    x = images(4 * G)
    y0, y1 = apply(x), apply(x.at[5].add(1.0))
    changed = np.any(np.asarray(y0 != y1), axis=(1, 2, 3))
    assert changed.tolist() == [i // G == 1 for i in range(4 * G)]


def test_ghost_batch_norm_on_dense_features():
    _, apply = gbn()
    x = images(2 * G, shape=(3,))
    np.testing.assert_allclose(apply(x)[G:], apply(x[G:]), rtol=1e-5, atol=1e-5)


def test_resnet_with_batch_norm_keeps_ghost_slices_independent():
    """Per-example losses of slice 0 do not move when an example of slice 2 is perturbed."""
    model = ResNet(10, blocks=1, norm="batch", ghost_size=2)
    x = images(6, shape=(8, 8, 3))
    labels = jnp.arange(6) % 10
    params = numpy_init(model, x.shape)
    loss = jax.jit(lambda x: cross_entropy(model.apply(params, x), labels))
    before, after = loss(x), loss(x.at[4].multiply(-3.0))
    np.testing.assert_array_equal(before[:4], after[:4])  # slices 0 and 1: bit for bit
    assert np.all(np.asarray(before[4:] != after[4:]))  # slice 2 did change


# ---------------------------------------------------------------- augmentation


def batch(n=64, size=6):
    """Random images with no symmetry, so a flip or a shift is always visible."""
    return jnp.asarray(np.random.default_rng(7).uniform(0.1, 1.0, (n, size, size, 2)), jnp.float32)


def test_augment_is_deterministic_in_the_key():
    x = batch()
    a = augment(jax.random.key(1), x, 2, True)
    np.testing.assert_array_equal(a, augment(jax.random.key(1), x, 2, True))
    assert not np.array_equal(a, augment(jax.random.key(2), x, 2, True))


def test_augment_off_is_the_identity():
    x = batch()
    assert augment(jax.random.key(1), x, 0, False) is x


def test_augment_flip_only():
    x = np.asarray(batch())
    y = np.asarray(augment(jax.random.key(3), jnp.asarray(x), 0, True))
    same = [np.array_equal(y[i], x[i]) for i in range(len(x))]
    mirrored = [np.array_equal(y[i], x[i, :, ::-1]) for i in range(len(x))]
    assert all(s != m for s, m in zip(same, mirrored))  # exactly one of the two, per example
    assert any(same) and any(mirrored)


def test_augment_crop_only():
    pad = 2
    x = np.asarray(batch())
    y = np.asarray(augment(jax.random.key(4), jnp.asarray(x), pad, False))
    padded = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    size = x.shape[1]
    found = []
    for i in range(len(x)):
        hits = [(r, c) for r, c in itertools.product(range(2 * pad + 1), repeat=2)
                if np.array_equal(y[i], padded[i, r:r + size, c:c + size])]
        assert len(hits) == 1, f"example {i}: {len(hits)} matching windows"
        found.append(hits[0])
    assert len(set(found)) > 5  # the offsets really vary


def test_augment_jits_and_vmaps():
    """Over a stack of keys (one per run) under jit, each run gets what the eager call gives."""
    x = batch()
    keys = jax.random.split(jax.random.key(5), 3)
    stacked = jax.jit(jax.vmap(lambda key: augment(key, x, 1, True)))(keys)
    assert stacked.shape == (3, *x.shape)
    np.testing.assert_array_equal(stacked[1], augment(keys[1], x, 1, True))
