"""The few statistics the benchmark reports: min / median / max, percentiles, a ratio."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence


def in_turn(i: int, first: Callable[[], object], second: Callable[[], object]) -> None:
    """Both, the order swapped on every other repetition: neither side always runs warm."""
    for action in (second, first) if i % 2 else (first, second):
        action()

NAN = float("nan")


def spread(values: Sequence[float]) -> tuple[float, float, float]:
    """(min, median, max); NaNs when there are no values."""
    if not values:
        return NAN, NAN, NAN
    return min(values), statistics.median(values), max(values)


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else NAN


def percentile(values: Sequence[float], p: float) -> float:
    """The nearest-rank p-quantile (p in 0..1) of values: one of the values measured, never an
    interpolation between two; NaN when there are none."""
    if not values:
        return NAN
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]


def ratio(ours: Sequence[float], baseline: Sequence[float]) -> float:
    """median(ours) / median(baseline); NaN when either is missing or the baseline is 0."""
    top, bottom = median(ours), median(baseline)
    if top != top or bottom != bottom or bottom == 0:
        return NAN
    return top / bottom


def number(value: float) -> str:
    """A value with as many digits as a benchmark can mean: 1234, 12.3, 1.23, 0.0123."""
    if value != value:
        return "—"
    size = abs(value)
    if size >= 100 or (value == int(value) and size >= 1):
        return f"{value:.0f}"
    if size >= 10:
        return f"{value:.1f}"
    if size >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"
