"""How many tests a gate ran, read from its output, and how that compares with the base.

A change can leave every test file alone and still run fewer tests: a `-k` in pytest.ini, a
conftest.py hook, a build tag. The orchestrator runs the gate once at the base as well, and
says when the commit ran fewer tests than the base did.

Each runner's closing summary is read as the runner prints it (pytest, unittest, jest,
vitest, mocha, node's test runner, go test -v or -json, cargo test, RSpec, PHPUnit). An output
that holds none of them gives None, "unknown": never a guess. go test without -v names no
tests, only packages: unknown too.

Which summary counts: a runner that sums its run up once (all but go and cargo) is read from
its last summary, because a failing test's captured output, printed before it, may hold
another run's (pytest's pytester, a test that runs unittest); go's per-test lines and cargo's
per-binary results are added up. Different runners in one output (`make test` running pytest,
then jest) are added up.

The code under review writes the gate's output, so this is a tripwire for a change that
quietly runs fewer tests, not a proof: a conftest.py can print any summary it likes (which
is why changes to it are shown to the reviewers, handoff.loop.testconfig).

Pure and stdlib only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

#: ANSI escapes (vitest colours its summary even into a pipe), CSI and OSC
ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
#: what handoff.inputs.joined puts where it cut a long output's middle out
CUT = re.compile(r"^… \[\d+ bytes cut by handoff\] …$")


@dataclass(frozen=True)
class Count:
    """What a gate's output says its runners did."""

    #: tests run to a verdict: passed, failed or errored
    ran: int
    #: of those, failed or errored, as the runner counts them (unittest counts each failing
    #: subtest)
    failed: int
    #: collected but not run to a verdict: skipped, deselected, filtered out, expected to
    #: fail, todo, pending
    skipped: int
    #: the runners whose summaries were read
    runners: tuple[str, ...]
    #: the output's middle was cut (the gate keeps its head and tail): a run whose summary
    #: was there is not counted
    cut: bool = False

    def fields(self) -> dict[str, object]:
        return {"ran": self.ran, "failed": self.failed, "skipped": self.skipped,
                "runners": list(self.runners), "cut": self.cut}

    @classmethod
    def from_fields(cls, data: Mapping[str, object] | None) -> Count | None:
        """A count as the state keeps it (its `fields`); None for none or an unreadable one."""
        if not isinstance(data, Mapping):
            return None
        ran, failed, skipped = (data.get(k) for k in ("ran", "failed", "skipped"))
        if not (isinstance(ran, int) and isinstance(failed, int) and isinstance(skipped, int)):
            return None
        runners = data.get("runners")
        return cls(ran, failed, skipped,
                   tuple(str(r) for r in runners) if isinstance(runners, list) else (),
                   data.get("cut") is True)


@dataclass(frozen=True)
class Summary:
    """One runner's summary, as read from a line (or a few) of the output."""

    runner: str
    ran: int
    failed: int
    skipped: int


# ---- the runners' summaries ------------------------------------------------------------------

PYTEST = re.compile(r"^=*\s*(?P<body>no tests ran|\d+ [a-z]+(?: [a-z]+)?(?:, \d+ [a-z]+(?: [a-z]+)?)*)"
                    r"(?: in [\d.]+s(?: \([\d:]+\))?)\s*=*$")
PYTEST_WORDS = {"passed": (1, 0, 0), "xpassed": (1, 0, 0), "failed": (1, 1, 0),
                "error": (1, 1, 0), "errors": (1, 1, 0), "skipped": (0, 0, 1),
                "deselected": (0, 0, 1), "xfailed": (0, 0, 1)}
UNITTEST_RAN = re.compile(r"^Ran (\d+) tests? in [\d.]+s$")
UNITTEST_END = re.compile(r"^(?:OK|FAILED|NO TESTS RAN)(?: \((.*)\))?$")
JEST = re.compile(r"^Tests:\s+(?P<body>(?:\d+ [a-z]+, )*)(?P<total>\d+) total$")
VITEST = re.compile(r"^\s*Tests\s+(?P<body>\d+ [a-z ]+(?: \| \d+ [a-z ]+)*)\s+\((?P<total>\d+)\)$")
JS_WORDS = {"passed": (1, 0, 0), "failed": (1, 1, 0), "skipped": (0, 0, 1), "todo": (0, 0, 1),
            "pending": (0, 0, 1)}
MOCHA_PASSING = re.compile(r"^\s*(\d+) passing \(\S+\)$")
MOCHA_MORE = re.compile(r"^\s*(\d+) (pending|failing)$")
#: node --test: its TAP reporter (`# tests 8`) and its spec reporter (`ℹ tests 8`)
NODE = re.compile(r"^(?:#|ℹ) (tests|suites|pass|fail|cancelled|skipped|todo|duration_ms) ([\d.]+)$")
GO_LINE = re.compile(r"^\s*--- (PASS|FAIL|SKIP): \S")
GO_JSON = re.compile(r'^\{.*"Action":"(pass|fail|skip)".*\}$')
CARGO = re.compile(r"^test result: (?:ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored; "
                   r"(\d+) measured; (\d+) filtered out")
RSPEC = re.compile(r"^(\d+) examples?, (\d+) failures?(?:, (\d+) pending)?"
                   r"(?:, (\d+) errors? occurred outside of examples)?$")
PHPUNIT_OK = re.compile(r"^OK \((\d+) tests?, \d+ assertions?\)$")
PHPUNIT = re.compile(r"^Tests: (\d+), Assertions: \d+((?:, [A-Za-z ]+: \d+)*)\.$")
PHPUNIT_NONE = "No tests executed!"

#: runners whose every summary counts (per package's tests, per test binary): the others,
#: only their last
ADDED_UP = {"go test", "cargo test"}


def _words(body: str, words: Mapping[str, tuple[int, int, int]],
           sep: str = ", ") -> tuple[int, int, int, bool]:
    """(ran, failed, skipped, any known word) of `3 passed, 1 failed` as words weigh them."""
    ran = failed = skipped = 0
    known = False
    for item in body.split(sep):
        number, _, word = item.strip().partition(" ")
        weight = words.get(word.strip())
        if weight is not None and number.isdigit():
            ran, failed = ran + weight[0] * int(number), failed + weight[1] * int(number)
            skipped, known = skipped + weight[2] * int(number), True
    return ran, failed, skipped, known


def _pytest(lines: Sequence[str], i: int) -> Summary | None:
    match = PYTEST.match(lines[i].strip())
    if not match:
        return None
    if match.group("body") == "no tests ran":
        return Summary("pytest", 0, 0, 0)
    ran, failed, skipped, known = _words(match.group("body"), PYTEST_WORDS)
    return Summary("pytest", ran, failed, skipped) if known else None


def _unittest(lines: Sequence[str], i: int) -> Summary | None:
    ran = UNITTEST_RAN.match(lines[i].strip())
    if not ran:
        return None
    # its verdict follows after a blank line: OK, FAILED (failures=1, …) or NO TESTS RAN
    end = next((UNITTEST_END.match(line.strip()) for line in lines[i + 1:i + 4]
                if UNITTEST_END.match(line.strip())), None)
    if end is None:
        return None
    said = {k.strip(): int(v) for k, _, v in (p.partition("=") for p in
                                              (end.group(1) or "").split(",")) if v.isdigit()}
    skipped = said.get("skipped", 0) + said.get("expected failures", 0)
    failed = said.get("failures", 0) + said.get("errors", 0) + said.get("unexpected successes", 0)
    return Summary("unittest", int(ran.group(1)) - skipped, failed, skipped)


def _jest(lines: Sequence[str], i: int) -> Summary | None:
    match = JEST.match(lines[i].strip())
    if not match:
        return None
    ran, failed, skipped, _ = _words(match.group("body").rstrip(", "), JS_WORDS)
    return Summary("jest", ran, failed, skipped)


def _vitest(lines: Sequence[str], i: int) -> Summary | None:
    match = VITEST.match(lines[i])
    if not match:
        return None
    ran, failed, skipped, known = _words(match.group("body"), JS_WORDS, " | ")
    return Summary("vitest", ran, failed, skipped) if known else None


def _mocha(lines: Sequence[str], i: int) -> Summary | None:
    match = MOCHA_PASSING.match(lines[i])
    if not match:
        return None
    passing, pending, failing = int(match.group(1)), 0, 0
    for line in lines[i + 1:i + 3]:  # `N pending` and `N failing` follow it, when not 0
        more = MOCHA_MORE.match(line)
        if not more:
            break
        if more.group(2) == "pending":
            pending = int(more.group(1))
        else:
            failing = int(more.group(1))
    return Summary("mocha", passing + failing, failing, pending)


def _node(lines: Sequence[str], i: int) -> Summary | None:
    first = NODE.match(lines[i].strip())
    if not first or first.group(1) != "tests":
        return None
    said: dict[str, int] = {}
    for line in lines[i + 1:i + 8]:
        match = NODE.match(line.strip())
        if not match:
            break
        if match.group(2).isdigit():
            said[match.group(1)] = int(match.group(2))
    if "pass" not in said or "fail" not in said:
        return None
    failed = said["fail"] + said.get("cancelled", 0)
    return Summary("node --test", said["pass"] + failed, failed,
                   said.get("skipped", 0) + said.get("todo", 0))


def _go(lines: Sequence[str], i: int) -> Summary | None:
    line = GO_LINE.match(lines[i])
    said = line.group(1).lower() if line else None  # go's own words: pass, fail, skip
    if said is None:
        event = GO_JSON.match(lines[i].strip())
        if not event:
            return None
        try:
            data = json.loads(lines[i])
        except ValueError:
            return None
        if not isinstance(data, dict) or not data.get("Test"):
            return None  # a package's own verdict, not a test's
        said = str(data.get("Action"))
    return Summary("go test", int(said != "skip"), int(said == "fail"), int(said == "skip"))


def _cargo(lines: Sequence[str], i: int) -> Summary | None:
    match = CARGO.match(lines[i].strip())
    if not match:
        return None
    passed, failed, ignored, measured, filtered = (int(g) for g in match.groups())
    return Summary("cargo test", passed + failed + measured, failed, ignored + filtered)


def _rspec(lines: Sequence[str], i: int) -> Summary | None:
    match = RSPEC.match(lines[i].strip())
    if not match:
        return None
    examples, failures = int(match.group(1)), int(match.group(2))
    pending, outside = int(match.group(3) or 0), int(match.group(4) or 0)
    # an error outside of examples (a spec file that does not load) counts as one that failed
    return Summary("rspec", examples - pending + outside, failures + outside, pending)


def _phpunit(lines: Sequence[str], i: int) -> Summary | None:
    line = lines[i].strip()
    if line == PHPUNIT_NONE:
        return Summary("phpunit", 0, 0, 0)
    ok = PHPUNIT_OK.match(line)
    if ok:
        return Summary("phpunit", int(ok.group(1)), 0, 0)
    match = PHPUNIT.match(line)
    if not match:
        return None
    said = {k.strip(): int(v) for k, _, v in (p.partition(":") for p in
                                              match.group(2).split(",")) if v.strip().isdigit()}
    skipped = said.get("Skipped", 0) + said.get("Incomplete", 0)
    return Summary("phpunit", int(match.group(1)) - skipped,
                   said.get("Errors", 0) + said.get("Failures", 0), skipped)


READERS: tuple[Callable[[Sequence[str], int], Summary | None], ...] = (
    _pytest, _unittest, _jest, _vitest, _mocha, _node, _go, _cargo, _rspec, _phpunit)


# ---- reading an output ----------------------------------------------------------------------

def _lines(output: str) -> tuple[list[str], bool]:
    """The output's lines as a terminal would have left them (escapes out, a `\\r` rewrite
    kept to its last text), and whether handoff cut its middle out."""
    text = ANSI.sub("", output)
    lines: list[str] = []
    cut = False
    for raw in text.split("\n"):
        line = raw.rstrip("\r").rsplit("\r", 1)[-1]
        if CUT.match(line.strip()):
            cut = True
        lines.append(line)
    return lines, cut


def summaries(output: str) -> list[Summary]:
    """Every runner's summary the output holds, in its order."""
    return _summaries(_lines(output)[0])


def _summaries(lines: Sequence[str]) -> list[Summary]:
    found: list[Summary] = []
    for i in range(len(lines)):
        for reader in READERS:
            summary = reader(lines, i)
            if summary is not None:
                found.append(summary)
                break
    return found


def read(output: str) -> Count | None:
    """What the gate's output says its runners ran; None: no runner's summary handoff reads
    (or a cut output whose counts are added up line by line)."""
    lines, cut = _lines(output)
    kept: dict[str, list[Summary]] = {}
    for found in _summaries(lines):
        kept.setdefault(found.runner, []).append(found)
    if not kept or (cut and ADDED_UP & kept.keys()):
        return None
    counted = [s for runner, runs in kept.items()
               for s in (runs if runner in ADDED_UP else runs[-1:])]
    return Count(sum(s.ran for s in counted), sum(s.failed for s in counted),
                 sum(s.skipped for s in counted), tuple(kept), cut)


# ---- which tests failed ----------------------------------------------------------------------

#: a failing test's line, as each runner names it: pytest's short summary (`FAILED path::test -
#: why`, `ERROR path`), unittest's report heading (`FAIL: test (module.Class.test)`), go test's
#: `--- FAIL: TestX (0.00s)`, cargo's `test path::name ... FAILED`
FAILING = (re.compile(r"^(?:FAILED|ERROR) (?P<name>[^\s(]\S*)(?: - .*)?$"),
           re.compile(r"^(?:FAIL|ERROR): (?P<name>\S+(?: \([\w.]+\))?)$"),
           re.compile(r"^\s*--- FAIL: (?P<name>\S+) \("),
           re.compile(r"^test (?P<name>\S+) \.\.\. FAILED$"))


def failing(output: str, limit: int = 20) -> list[str]:
    """The tests the output names as failed or errored, each once, in the output's order (at
    most limit); [] when it names none handoff reads (the summary still says the run failed)."""
    found: list[str] = []
    for line in _lines(output)[0]:
        for pattern in FAILING:
            match = pattern.match(line.rstrip())
            if match and match.group("name") not in found:
                found.append(match.group("name"))
                break
        if len(found) >= limit:
            break
    return found


# ---- against the base -----------------------------------------------------------------------

def fewer(base: Count | None, now: Count | None) -> int:
    """How many fewer tests ran at the commit than at the base (0: not fewer, or unknown)."""
    if base is None or now is None:
        return 0
    return max(0, base.ran - now.ran)


def compared(base: Count | None, now: Count | None) -> str:
    """One sentence: what the gate ran at the base and at this commit."""
    if base is None and now is None:
        return ("tests run: unknown at the base and at this commit (the gate's output holds no "
                "test runner's summary handoff reads)")
    if base is None or now is None:
        known = (f"{now.ran} at this commit, unknown at the base" if now is not None
                 else f"{base.ran} at the base, unknown at this commit" if base is not None
                 else "")
        return f"tests run: {known} (no test runner's summary handoff reads in its output)"
    change = now.ran - base.ran
    said = f"{base.ran} tests ran at the base, {now.ran} at this commit"
    said += f" ({-change} fewer)" if change < 0 else f" ({change} more)" if change else ""
    if now.skipped > base.skipped:
        said += f"; {now.skipped} skipped or left out, {base.skipped} at the base"
    if base.cut or now.cut:
        said += "; the output was cut: a run summed up in its cut middle is not counted"
    return said
