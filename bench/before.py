"""`python -m bench --before COMMIT`: the same scenarios run against handoff as it was at an
earlier commit, in the same run, and each figure shown before and after.

The earlier commit's files come out of this checkout's own history (`git archive`: nothing of
the work tree or of git's admin files is touched) and are installed, with their runtime
dependencies, into a venv of their own under ~/.cache/handoff-bench/, kept per commit. The
after side is this checkout installed the same way (bench.runtime_venv), so both sides are
handoff as a person installs it, and only the code differs.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from bench.figures import Figure, md_escape, three
from bench.machine import CHECKOUT
from bench.runtime_venv import SOURCE, cache_dir, holds, installed
from bench.sandbox import BenchError
from bench.stats import median, number, ratio


@dataclass(frozen=True)
class Side:
    """One side of a comparison: the interpreter running handoff, and its commit."""

    python: str
    commit: str


def resolve(commit: str) -> str:
    """The full name of commit in this checkout's history; BenchError when it has none."""
    done = subprocess.run(["git", "-C", str(CHECKOUT), "rev-parse", "--verify", "--quiet",
                           f"{commit}^{{commit}}"], capture_output=True, text=True, timeout=30,
                          check=False)
    if done.returncode != 0:
        raise BenchError(f"no commit {commit!r} in {CHECKOUT}'s history")
    return done.stdout.strip()


def extract(commit: str, into: Path) -> None:
    """The files pip needs (SOURCE) as they were at commit, written under into."""
    done = subprocess.run(["git", "-C", str(CHECKOUT), "archive", "--format=tar", commit,
                           "--", *SOURCE], capture_output=True, timeout=120, check=False)
    if done.returncode != 0:
        # a name the commit did not have yet (LICENSE): ask again for the ones it has
        listed = subprocess.run(["git", "-C", str(CHECKOUT), "ls-tree", "--name-only", commit],
                                capture_output=True, text=True, timeout=30, check=False)
        names = [n for n in SOURCE if n in listed.stdout.split("\n")]
        done = subprocess.run(["git", "-C", str(CHECKOUT), "archive", "--format=tar", commit,
                               "--", *names], capture_output=True, timeout=120, check=False)
    if done.returncode != 0:
        raise BenchError(f"git archive {commit[:10]} failed: "
                         f"{done.stderr.decode(errors='replace').strip()[-400:]}")
    with tarfile.open(fileobj=io.BytesIO(done.stdout)) as archive:
        archive.extractall(into, filter="data")


def before_side(commit: str) -> Side:
    """handoff at commit, installed in its own venv (kept: made once per commit)."""
    full = resolve(commit)
    folder = cache_dir() / f"before-{full[:12]}"
    with tempfile.TemporaryDirectory(prefix="hb-before-") as scratch:
        if not holds(folder, full):
            extract(full, Path(scratch))
        python = installed(folder, Path(scratch), full)
    return Side(str(python), full[:10])


def merged(runs: Sequence[Sequence[Figure]]) -> list[Figure]:
    """The figures of several runs of one scenario as one list: each figure's values (and its
    baseline's) from every run, in the first run's order; an error of any run kept."""
    out: dict[str, Figure] = {}
    for figures in runs:
        for figure in figures:
            known = out.get(figure.name)
            out[figure.name] = figure if known is None else replace(
                known, handoff=[*known.handoff, *figure.handoff],
                baseline=[*known.baseline, *figure.baseline],
                error=known.error or figure.error)
    return list(out.values())


def _row(figure: Figure | None) -> tuple[str, str]:
    """(its values, its ratio) as the table shows them; dashes when that side has none."""
    if figure is None:
        return "—", "—"
    found = ratio(figure.handoff, figure.baseline)
    return three(figure.handoff), "—" if found != found else f"{number(found)}×"


def _change(before: Figure | None, after: Figure | None) -> str:
    if before is None or after is None or not before.handoff or not after.handoff:
        return "—"
    old, new = median(before.handoff), median(after.handoff)
    return "—" if not old else f"{(new - old) / old * 100:+.0f} %"


COMPARED = ("figure", "unit", "before min / median / max", "before ratio",
            "after min / median / max", "after ratio", "change of the median", "after: verdict")


def compared_rows(before: Sequence[Figure], after: Sequence[Figure]) -> list[tuple[str, ...]]:
    """One row per figure of either side, in the after side's order (a figure only one side
    has is shown with dashes on the other)."""
    earlier = {f.name: f for f in before}
    names = [f.name for f in after] + [f.name for f in before if f.name not in
                                       {a.name for a in after}]
    later = {f.name: f for f in after}
    rows: list[tuple[str, ...]] = []
    for name in names:
        old, new = earlier.get(name), later.get(name)
        either = new if new is not None else old
        unit = either.unit if either is not None else ""
        rows.append((name, unit, *_row(old), *_row(new), _change(old, new),
                     new.verdict if new is not None else "—"))
    return rows


def render_compared(before: Sequence[Figure], after: Sequence[Figure], sides: tuple[Side, Side],
                    markdown: bool) -> str:
    """The before/after table, headed by the two commits."""
    title = f"before: {sides[0].commit} ({sides[0].python}); after: {sides[1].commit} " \
            f"({sides[1].python})"
    rows = compared_rows(before, after)
    if markdown:
        out = [title, "", "| " + " | ".join(COMPARED) + " |",
               "|" + "|".join(["---"] * len(COMPARED)) + "|"]
        out += ["| " + " | ".join(md_escape(c) for c in row) + " |" for row in rows]
        return "\n".join(out)
    lines: list[tuple[str, ...]] = [COMPARED, *rows]
    widths = [max(len(line[c]) for line in lines) for c in range(len(COMPARED))]
    out = [title, ""]
    for n, line in enumerate(lines):
        out.append("  ".join(cell.ljust(widths[c]) for c, cell in enumerate(line)).rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)
