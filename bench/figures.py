"""A figure of the benchmark: what handoff measured, what its raw baseline measured doing the
same work, the target it is held to and the verdict; and the two ways of printing a list of
them (a plain table for a terminal, a markdown table for docs/performance.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from bench.stats import median, number, percentile, ratio, spread

#: what a target is about: the median ratio against the baseline, a statistic of handoff's
#: values, or each of handoff's values
Stat = Literal["ratio", "median", "p50", "p95", "max", "each"]
Verdict = Literal["met", "missed", "info"]


@dataclass(frozen=True)
class Target:
    stat: Stat
    at_most: float | None = None
    at_least: float | None = None

    def describe(self, unit: str) -> str:
        unit = "×" if self.stat == "ratio" else f" {unit}"
        what = {"ratio": "", "each": "each ", "median": "median "}.get(self.stat, f"{self.stat} ")
        if self.at_most is not None and self.at_most == self.at_least:
            return f"{what}= {number(self.at_most)}{unit}"
        bounds = [f"≥ {number(self.at_least)}{unit}"] if self.at_least is not None else []
        bounds += [f"≤ {number(self.at_most)}{unit}"] if self.at_most is not None else []
        return what + " and ".join(bounds)

    def measured(self, figure: Figure) -> list[float]:
        """The values this target judges (one, or each of handoff's for "each")."""
        values = figure.handoff
        if self.stat == "each":
            return list(values)
        if self.stat == "ratio":
            found = ratio(values, figure.baseline)
        elif self.stat == "median":
            found = median(values)
        elif self.stat == "max":
            found = max(values, default=float("nan"))
        else:
            found = percentile(values, 0.5 if self.stat == "p50" else 0.95)
        return [] if found != found else [found]

    def holds(self, figure: Figure) -> bool:
        """Met: there is something to judge and all of it is within bounds (no data misses)."""
        values = self.measured(figure)
        return bool(values) and all(
            (self.at_most is None or v <= self.at_most)
            and (self.at_least is None or v >= self.at_least) for v in values)

    def shown(self, figure: Figure) -> str:
        values = self.measured(figure)
        if not values:
            return "no data"
        unit = "×" if self.stat == "ratio" else f" {figure.unit}"
        low, high = min(values), max(values)
        found = number(low) if low == high else f"{number(low)}–{number(high)}"
        label = {"ratio": "", "each": "each ", "median": "median "}.get(self.stat,
                                                                      f"{self.stat} ")
        return f"{label}{found}{unit}"


@dataclass
class Figure:
    """One row: handoff's values against its baseline's (both in unit), and its targets."""

    name: str
    unit: str
    handoff: list[float]
    baseline: list[float] = field(default_factory=list)
    #: what the raw baseline does ("" when the figure has none)
    baseline_name: str = ""
    targets: tuple[Target, ...] = ()
    #: how it is measured, or what it means, when the name cannot say it
    note: str = ""
    #: why the scenario could not measure it (the verdict is then missed)
    error: str = ""

    @property
    def verdict(self) -> Verdict:
        if self.error:
            return "missed"
        if not self.targets:
            return "info"
        return "met" if all(t.holds(self) for t in self.targets) else "missed"

    def target_text(self) -> str:
        return "; ".join(t.describe(self.unit) for t in self.targets) or "—"

    def measured_text(self) -> str:
        return "; ".join(t.shown(self) for t in self.targets) or "—"

    def ratio_text(self) -> str:
        found = ratio(self.handoff, self.baseline)
        return "—" if found != found else f"{number(found)}×"


def three(values: Sequence[float]) -> str:
    """min / median / max."""
    return "—" if not values else " / ".join(number(v) for v in spread(values))


COLUMNS = ("figure", "unit", "handoff min / median / max", "baseline min / median / max",
           "ratio", "target", "measured", "verdict", "n")


def cells(figure: Figure) -> tuple[str, ...]:
    n = f"{len(figure.handoff)}" + (f"/{len(figure.baseline)}" if figure.baseline else "")
    return (figure.name, figure.unit, three(figure.handoff), three(figure.baseline),
            figure.ratio_text(), figure.target_text(), figure.measured_text(),
            figure.verdict, n)


def render_text(figures: Sequence[Figure]) -> str:
    """An aligned table, then each baseline and note under the figure's number."""
    lines = [COLUMNS, *(cells(f) for f in figures)]
    widths = [max(len(line[c]) for line in lines) for c in range(len(COLUMNS))]
    right = {2, 3, 4, 8}
    out = []
    for row, line in enumerate(lines):
        first = f"{row:>2} " if row else "   "
        out.append(first + "  ".join(cell.rjust(widths[c]) if c in right else cell.ljust(widths[c])
                                     for c, cell in enumerate(line)).rstrip())
        if row == 0:
            out.append("   " + "  ".join("-" * w for w in widths))
    out.append("")
    out.extend(_explanations(figures))
    return "\n".join(out).rstrip()


def _explanations(figures: Sequence[Figure]) -> list[str]:
    out = []
    for number_, figure in enumerate(figures, 1):
        said = [f"baseline: {figure.baseline_name}"] if figure.baseline_name else []
        said += [figure.note] if figure.note else []
        said += [f"ERROR: {figure.error}"] if figure.error else []
        if said:
            out.append(f"{number_:>2} {figure.name}: " + "; ".join(said))
    return out


def md_escape(text: str) -> str:
    """A cell's text as markdown shows it in a table."""
    return text.replace("|", "\\|")


def render_markdown(figures: Sequence[Figure], machine: Sequence[str], title: str) -> str:
    """A markdown section: the machine it ran on, the table, then what each baseline does."""
    out = [f"## {title}", "", "Machine:", ""]
    out += [f"- {line}" for line in machine]
    out += ["", "| " + " | ".join(("#", *COLUMNS)) + " |",
            "|" + "|".join(["---"] * (len(COLUMNS) + 1)) + "|"]
    for n, figure in enumerate(figures, 1):
        out.append("| " + " | ".join(md_escape(c) for c in (str(n), *cells(figure))) + " |")
    explained = _explanations(figures)
    if explained:
        out += ["", *(f"- {md_escape(line.strip())}" for line in explained)]
    return "\n".join(out)
