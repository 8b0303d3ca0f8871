"""Mid-run checkpoints of a group: its whole state at a chunk boundary, so a killed group
resumes where it was instead of at step 0.

A checkpoint is `step_<N>/` (the state's arrays, written by orbax-checkpoint, which writes to a
temporary folder and renames it when complete) and `step_<N>.json` beside it, written last and
atomically: the step, the wall seconds so far, the packing (which run sits in which slot), and
the sha256 of every file orbax wrote. A checkpoint without its JSON, or whose files do not match
their digests, is skipped with a warning and the one before it is tried; the newest two are
kept while the group trains.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from scaling.tasks.storage import file_sha256, write_atomically
from scaling.train.mesh import is_leader
from scaling.train.program import GroupProgram
from scaling.train.repack import Packing
from scaling.train.spec import RunSpec
from scaling.train.start import Start
from scaling.train.step import RunState

log = logging.getLogger(__name__)
KEEP = 2  # checkpoints kept while a group trains: the newest, and one to fall back on


class GroupCheckpoints:
    """One group's checkpoint folder: when to save, save, find the newest good one, clean up.

    Besides every `every_minutes`, a checkpoint is saved at each chunk boundary in `at_steps`
    (the branch points of `scaling branch`); those are never pruned and outlive the group.
    """

    def __init__(self, folder: Path, every_minutes: float, keep: bool,
                 at_steps: tuple[int, ...] = ()) -> None:
        self.folder, self.every_s, self.keep = Path(folder), 60.0 * every_minutes, keep
        self.at_steps = frozenset(at_steps)
        self.last = time.perf_counter()
        self._checkpointer: Any = None

    @property
    def checkpointer(self) -> Any:
        if self._checkpointer is None:
            import orbax.checkpoint as ocp  # its import costs ~1 s; only groups that save pay it
            self._checkpointer = ocp.StandardCheckpointer()
        return self._checkpointer

    def due(self, step: int) -> bool:
        """A checkpoint after `step`: one of `at_steps`, or time for one. Every process must
        agree (orbax saves collectively), so with several processes the leader's clock
        decides."""
        if step in self.at_steps:
            return True
        due = self.every_s > 0 and time.perf_counter() - self.last >= self.every_s
        if jax.process_count() > 1:
            from jax.experimental import multihost_utils
            due = bool(multihost_utils.broadcast_one_to_all(np.asarray(due)))
        return due

    def save(self, rs: RunState, packing: Packing, first_step: int, wall_s: float,
             seen: tuple[np.ndarray, np.ndarray]) -> None:
        """Write the state after step `first_step`, then its JSON; drop all but the newest KEEP."""
        path = self.folder / f"step_{first_step}"
        if is_leader():
            shutil.rmtree(path, ignore_errors=True)  # a folder of a save killed after its rename
        self.checkpointer.save(path.absolute(), _saveable(rs))
        self.checkpointer.wait_until_finished()
        if is_leader():
            meta = {"step": first_step, "wall_s": wall_s, "packing": packing.to_dict(),
                    "seen": [np.asarray(seen[0]).tolist(), np.asarray(seen[1]).tolist()],
                    "files": _digests(path)}
            text = json.dumps(meta).encode()
            write_atomically(self.folder / f"step_{first_step}.json", lambda f: f.write(text))
            self._prune()
        self.last = time.perf_counter()

    def restore(self, program: GroupProgram, runs: list[RunSpec], data: Any, eval_data: Any,
                step: int | None = None) -> Start | None:
        """The group of `runs` from the newest checkpoint whose files are intact (or the one at
        `step`); None to start from step 0 (or when the one at `step` is missing or damaged)."""
        metas = sorted(self.folder.glob("step_*.json"), key=_step, reverse=True)
        for meta_path in [m for m in metas if step is None or _step(m) == step]:
            try:
                meta = json.loads(meta_path.read_text())
                path = self.folder / f"step_{meta['step']}"
                bad = [name for name, digest in meta["files"].items()
                       if not (path / name).is_file() or file_sha256(path / name) != digest]
                if bad:
                    raise ValueError(f"{len(bad)} file(s) differ from their digests ({bad[0]})")
                packing = Packing.from_dict(meta["packing"])
                abstract = program.abstract_state(len(packing.slots), data, eval_data)
                rs = _restored(self.checkpointer.restore(path.absolute(), _saveable(abstract)),
                               abstract)
            except Exception as exc:  # any damage: this checkpoint is unusable, try the last one
                log.warning("%s: checkpoint %s is unusable (%s); trying an earlier one",
                            self.folder, meta_path.stem, exc)
                continue
            seen = meta["seen"]
            self.last = time.perf_counter()
            return Start(runs, rs, packing, int(meta["step"]), float(meta["wall_s"]),
                         (np.asarray(seen[0], bool), np.asarray(seen[1], np.int64)))
        return None

    def finish(self) -> None:
        """The group is done: its checkpoints go, unless train.keep_checkpoints; those at
        `at_steps` stay."""
        if self._checkpointer is not None:
            self._checkpointer.close()
        if self.keep or not is_leader():
            return
        if self.at_steps:
            self._prune(keep=0)
        else:
            shutil.rmtree(self.folder, ignore_errors=True)

    def _prune(self, keep: int = KEEP) -> None:
        """Keep the newest `keep` complete checkpoints and those at `at_steps`; drop the others
        and folders left by saves that never finished."""
        metas = sorted(self.folder.glob("step_*.json"), key=_step, reverse=True)
        kept = {m.stem for m in metas[:keep]} | {m.stem for m in metas if _step(m) in self.at_steps}
        for meta in metas:
            if meta.stem not in kept:
                meta.unlink(missing_ok=True)
        for entry in self.folder.iterdir():
            if entry.is_dir() and entry.name not in kept:
                shutil.rmtree(entry, ignore_errors=True)


def _step(meta_path: Path) -> int:
    return int(meta_path.stem.split("_")[1])


def _digests(path: Path) -> dict[str, str]:
    return {str(f.relative_to(path)): file_sha256(f) for f in sorted(path.rglob("*")) if f.is_file()}


def _is_key(leaf: Any) -> bool:
    return jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key)


def _saveable(rs: Any) -> dict[str, Any]:
    """The state's leaves by position, random keys as their raw uint32 data (orbax stores
    plain arrays), empty leaves (a group without targets) left out: orbax refuses them. Works
    on concrete and on abstract (ShapeDtypeStruct) states."""
    out = {}
    for i, leaf in enumerate(jax.tree.leaves(rs)):
        if leaf.size == 0:
            continue
        if _is_key(leaf) and isinstance(leaf, jax.ShapeDtypeStruct):
            shape = jax.eval_shape(jax.random.key_data, leaf)
            leaf = jax.ShapeDtypeStruct(shape.shape, shape.dtype, sharding=leaf.sharding)
        elif _is_key(leaf):
            leaf = jax.random.key_data(leaf)
        out[str(i)] = leaf
    return out


def _restored(saved: dict[str, Any], abstract: RunState) -> RunState:
    leaves, tree = jax.tree.flatten(abstract)
    # The state's keys come from jax.random.key, so they have the default implementation.
    restored = [jnp.zeros(a.shape, a.dtype, device=a.sharding) if a.size == 0
                else jax.random.wrap_key_data(saved[str(i)]) if _is_key(a) else saved[str(i)]
                for i, a in enumerate(leaves)]
    return jax.tree.unflatten(tree, restored)
