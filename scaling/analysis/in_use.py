"""A folder still being written is not analysed unless asked: its groups' claims
(scaling.store.claims) say whether live processes are training in it.

`scaling analyze`, `scaling compare` and a sweep's own analysis refuse such a folder in one
line naming a group and its holder; with --partial they analyse what is there, and the
analysis records the groups then in use (analysis.json `partial`, a line atop report.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scaling.analysis.branching import is_branch_folder
from scaling.errors import ConfigError
from scaling.store import layout
from scaling.store.cells import is_cells_folder, read_cells
from scaling.store.claims import Holder, in_use, live_claims


def _folders(out: Path) -> dict[str, Path]:
    """The folders whose groups are claimed, by the prefix their claims are named with: the
    folder itself; a branch folder's base and branches; a multi-cell folder's cells."""
    if is_branch_folder(out):
        return {f"{layout.BASE}/": layout.base_dir(out),
                f"{layout.BRANCHES}/": layout.branches_dir(out)}
    if is_cells_folder(out):
        return {f"{c['folder']}/": out / c["folder"] for c in read_cells(out)["cells"]}
    return {"": out}


def claimed(out: str | Path) -> dict[str, Holder]:
    """The groups of `out` live processes hold ('base/batch8-...' in a subfolder)."""
    return {prefix + name: holder for prefix, folder in _folders(Path(out)).items()
            for name, holder in live_claims(folder).items()}


def refusal(out: str | Path) -> str | None:
    """The line that refuses `out` while live processes hold groups of it, else None."""
    held = claimed(out)
    return in_use(out, held) if held else None


def check(out: str | Path, partial: bool) -> list[dict[str, str]]:
    """Refuse `out` (ConfigError) while live processes hold groups of it, unless `partial`:
    then those groups, as analysis.json's `partial` records them ([] when none)."""
    held = claimed(out)
    if held and not partial:
        raise ConfigError(f"{in_use(out, held)}; analyse it once they have finished, or pass "
                          "--partial to analyse what is there now")
    return [{"group": group, "holder": holder.describe()} for group, holder in held.items()]


def mark(result: dict[str, Any], groups: list[dict[str, str]]) -> dict[str, Any]:
    """`result` with `partial` set to the groups in use when it was read (none: no key)."""
    if groups:
        result["partial"] = groups
    return result


def note(analysis: dict[str, Any], label: str | None = None) -> list[str]:
    """The line atop a report of a partial analysis (of sweep `label`, in a comparison), and a
    blank line; nothing otherwise."""
    groups = analysis.get("partial") or []
    if not groups:
        return []
    first = groups[0]
    more = f" and {len(groups) - 1} more" if len(groups) > 1 else ""
    of = f" of {label}" if label else ""
    return [f"**Partial analysis**{of} (--partial): read while {len(groups)} group(s) were still "
            f"training ({first['group']}, {first['holder']}{more}); analyse again once they "
            "have finished.", ""]
