"""The benchmark's runner: its statistics, verdicts and tables from given figures, and one real
scenario (startup) run through `python -m bench` as the lead runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.before import Side, compared_rows, extract, merged, render_compared, resolve
from bench.figures import Figure, Target, render_markdown, render_text
from bench.runner import chosen
from bench.sandbox import BenchError
from bench.stats import number, percentile, ratio, spread
from tests.paths import ROOT


def test_statistics() -> None:
    assert spread([3.0, 1.0, 2.0, 10.0]) == (1.0, 2.5, 10.0)
    values = [float(v) for v in range(1, 21)]  # 1..20
    assert percentile(values, 0.5) == 11.0  # nearest rank: one of the values measured
    assert percentile(values, 0.95) == 19.0
    assert percentile(values, 1.0) == 20.0
    assert ratio([4.0, 6.0, 100.0], [2.0, 3.0, 1.0]) == 3.0  # median / median
    assert ratio([1.0], []) != ratio([1.0], [])  # NaN: no baseline
    assert ratio([1.0], [0.0]) != ratio([1.0], [0.0])
    assert [number(v) for v in (1234.4, 12.34, 2.0, 1.234, 0.01234)] == \
        ["1234", "12.3", "2", "1.23", "0.0123"]


def test_verdicts_follow_the_targets() -> None:
    ratio_target = (Target("ratio", at_most=1.5),)
    assert Figure("a", "ms", [14.0, 15.0], [10.0, 10.0], targets=ratio_target).verdict == "met"
    assert Figure("a", "ms", [16.0], [10.0], targets=ratio_target).verdict == "missed"
    assert Figure("a", "ms", [16.0], [], targets=ratio_target).verdict == "missed", \
        "no baseline is no data, never met"
    assert Figure("a", "ms", [16.0], [10.0]).verdict == "info"
    assert Figure("a", "ms", [], error="boom").verdict == "missed"
    tail = [1.0] * 19 + [30.0]
    p = (Target("p50", at_most=5), Target("p95", at_most=20))
    assert Figure("h", "ms", tail, targets=p).verdict == "met"  # p95 is the 19th of 20
    assert Figure("h", "ms", [*tail, 30.0, 30.0], targets=p).verdict == "missed"
    each = (Target("each", at_most=2, at_least=2),)
    assert Figure("runs", "runs", [2, 2], targets=each).verdict == "met"
    assert Figure("runs", "runs", [2, 4], targets=each).verdict == "missed"
    assert Figure("runs", "runs", [2, 1], targets=each).verdict == "missed"
    assert Figure("cpu", "%", [0.01, 0.2, 0.03], targets=(Target("median", at_most=0.05),)
                  ).verdict == "met"
    assert Figure("cpu", "%", [0.01, 0.2, 0.3], targets=(Target("median", at_most=0.05),)
                  ).verdict == "missed"


FIGURES = [
    Figure("whole ticket", "ms", [3000.0, 3100.0, 2900.0], [1000.0, 1100.0, 900.0],
           "the same work by hand", targets=(Target("ratio", at_most=1.5),), note="2 rounds"),
    Figure("hand-over | next", "ms", [1.0, 2.0, 30.0],
           targets=(Target("p50", at_most=5), Target("p95", at_most=20))),
    Figure("post_create runs", "runs", [2.0, 2.0], targets=(Target("each", at_most=2,
                                                                      at_least=2),)),
    Figure("status per ticket", "µs", [40.0], [20.0]),
]


def test_the_markdown_table_has_every_figure_with_its_target_and_verdict() -> None:
    text = render_markdown(FIGURES, ["CPU: a test CPU, 2 logical CPUs", "tmux: 3.3a"], "a run")
    lines = text.splitlines()
    assert lines[0] == "## a run"
    assert "- CPU: a test CPU, 2 logical CPUs" in lines and "- tmux: 3.3a" in lines
    rows = [line for line in lines if line.startswith("| ") and not line.startswith("| #")]
    cells = [[c.strip() for c in row.strip("|").split(" | ")] for row in rows]
    assert cells == [
        ["1", "whole ticket", "ms", "2900 / 3000 / 3100", "900 / 1000 / 1100", "3×", "≤ 1.50×",
         "3×", "missed", "3/3"],
        ["2", "hand-over \\| next", "ms", "1 / 2 / 30", "—", "—", "p50 ≤ 5 ms; p95 ≤ 20 ms",
         "p50 2 ms; p95 30 ms", "missed", "3"],
        ["3", "post_create runs", "runs", "2 / 2 / 2", "—", "—", "each = 2 runs", "each 2 runs",
         "met", "2"],
        ["4", "status per ticket", "µs", "40 / 40 / 40", "20 / 20 / 20", "2×", "—", "—", "info",
         "1/1"],
    ]
    assert "- 1 whole ticket: baseline: the same work by hand; 2 rounds" in lines


def test_the_text_table_aligns_the_same_cells() -> None:
    lines = render_text(FIGURES).splitlines()
    assert lines[0].split()[:2] == ["figure", "unit"]
    assert " 1 whole ticket" in lines[2] and lines[2].rstrip().endswith("3/3")
    column = lines[0].index("verdict")
    assert [line[column:].split()[0] for line in lines[2:6]] == ["missed", "missed", "met", "info"]


def test_scenarios_are_chosen_by_name_and_crowd_and_review_only_when_named() -> None:
    default = chosen([])
    assert not isinstance(default, str)
    assert [s.name for s in default] == ["ops", "ticket", "floor", "startup"]
    named = chosen(["review", "crowd", "startup"])
    assert not isinstance(named, str) and [s.name for s in named] == ["startup", "crowd",
                                                                      "review"]
    assert chosen(["nope"]) == "unknown scenario nope; choose from ops, ticket, floor, " \
        "startup, crowd, review"


def test_startup_runs_and_prints_every_figure_with_a_target_and_a_verdict() -> None:
    done = subprocess.run([sys.executable, "-m", "bench", "startup", "--reps", "2", "--python",
                           sys.executable, "--markdown"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith("- CPU: ") for line in lines), "the machine heads the table"
    assert any(line.startswith("- handoff: commit ") for line in lines)
    rows = {cells[1]: cells for cells in
            ([c.strip() for c in line.strip("|").split(" | ")] for line in lines
             if line.startswith("| ") and not line.startswith("| #"))}
    assert sorted(rows) == ["CPU of handoff --help", "CPU of handoff status",
                            "CPU of handoff submit"]
    for name, target in (("submit", "≤ 3×"), ("status", "≤ 6×"), ("--help", "≤ 8×")):
        cells = rows[f"CPU of handoff {name}"]
        assert cells[2] == "ms" and cells[6] == target
        assert cells[8] in ("met", "missed")
        assert cells[9] == "2/2", "two runs of each, two of python -c pass"
        assert cells[3].count(" / ") == 2 and cells[4].count(" / ") == 2
        assert cells[5].endswith("×") and cells[7] == cells[5]
    assert f"interpreter {sys.executable}" in done.stdout


@pytest.mark.parametrize("argv", [["nope"], ["--reps", "x"]])
def test_a_usage_error_exits_2(argv: list[str]) -> None:
    done = subprocess.run([sys.executable, "-m", "bench", *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stdout + done.stderr


def test_help_lists_every_scenario() -> None:
    done = subprocess.run([sys.executable, "-m", "bench", "--help"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0
    listed = done.stdout.split("scenarios (default: all but crowd):", 1)[1].split()
    for name in ("ops", "ticket", "floor", "startup", "crowd"):
        assert name in listed, f"{name} missing from --help"


def test_before_and_after_are_shown_side_by_side_figure_by_figure() -> None:
    earlier = [Figure("whole ticket", "ms", [4000.0, 4200.0], [1000.0, 1000.0]),
               Figure("gone since", "ms", [5.0])]
    later = [Figure("whole ticket", "ms", [3000.0, 3000.0], [1000.0, 1000.0],
                    targets=(Target("ratio", at_most=3.5),)),
             Figure("new | here", "runs", [2.0])]
    sides = (Side("/b/python", "aaaaaaaaaa"), Side("/a/python", "bbbbbbbbbb"))
    assert compared_rows(earlier, later) == [
        ("whole ticket", "ms", "4000 / 4100 / 4200", "4.10×", "3000 / 3000 / 3000", "3×",
         "-27 %", "met"),
        ("new | here", "runs", "—", "—", "2 / 2 / 2", "—", "—", "info"),
        ("gone since", "ms", "5 / 5 / 5", "—", "—", "—", "—", "—"),
    ]
    text = render_compared(earlier, later, sides, markdown=True).splitlines()
    assert text[0] == "before: aaaaaaaaaa (/b/python); after: bbbbbbbbbb (/a/python)"
    assert text[5] == "| new \\| here | runs | — | — | 2 / 2 / 2 | — | — | info |"
    plain = render_compared(earlier, later, sides, markdown=False).splitlines()
    assert plain[2].split()[:3] == ["figure", "unit", "before"]
    assert plain[4].startswith("whole ticket") and plain[4].rstrip().endswith("met")


def test_an_earlier_commit_s_files_come_out_of_the_history_alone(tmp_path: Path) -> None:
    commit = resolve("HEAD")
    assert len(commit) == 40
    extract(commit, tmp_path)
    assert (tmp_path / "pyproject.toml").is_file()
    assert (tmp_path / "handoff" / "__init__.py").is_file()
    assert not (tmp_path / "tests").exists(), "only what pip needs"
    with pytest.raises(BenchError, match="no commit 'not-a-commit'"):
        resolve("not-a-commit")


def test_the_runs_of_one_side_are_one_figure_each_and_an_error_is_kept() -> None:
    first = [Figure("ticket", "ms", [1.0, 2.0], [0.5]), Figure("runs", "runs", [3.0])]
    second = [Figure("ticket", "ms", [4.0], [0.7, 0.9]),
              Figure("runs", "runs", [], error="it could not run")]
    ticket, runs = merged([first, second])
    assert (ticket.name, ticket.handoff, ticket.baseline) == ("ticket", [1.0, 2.0, 4.0],
                                                              [0.5, 0.7, 0.9])
    assert runs.handoff == [3.0] and runs.error == "it could not run"
