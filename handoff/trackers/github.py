"""GitHub issues read with the person's own `gh` (docs/trackers.md): their login, their
environment, the repository the checkout's remote names. handoff keeps no token and puts none
in an argv or a message.

Running gh is `GitHub._gh`; the rest is plain functions a unit test calls without a process:
which ref or label is fit to ask for, gh's JSON read into a TrackedIssue, and what gh printed
when it failed turned into one HandoffError with a hint.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TypeGuard

from handoff.errors import ExternalFailure, HandoffError, MissingTool, NotFound, UsageError
from handoff.machinery.credentials import redact
from handoff.operations.remote import last_words, printable
from handoff.trackers import TrackedIssue

#: seconds gh may take to answer one question: a person is waiting
DEADLINE = 60.0
GH_INSTALL = "https://cli.github.com"
#: the fields `gh issue view --json` is asked for (a closed issue is read too: state says so)
FIELDS = "number,title,body,url,labels,state"
#: GitHub's search (which gh uses to list by label) gives at most 1000 results
MOST = 1000
#: gh's exit code when it has no login at all (cli/cli internal/ghcmd/cmd.go: exitAuth)
EXIT_AUTH = 4
#: how much of gh's garbled stdout an error quotes
QUOTED = 200
#: an issue's number as a person may type it: 123 or #123, ASCII digits only
NUMBER = re.compile(r"#?([0-9]{1,9})")
#: gh's words for "the checkout has no GitHub remote it can use"
NO_REPOSITORY = ("no git remotes found", "none of the git remotes", "not a git repository",
                 "could not determine base repo", "set-default")
#: gh's words for "no login, or a login GitHub refuses"
NO_LOGIN = ("gh auth login", "GH_TOKEN", "HTTP 401", "Bad credentials",
            "authentication token")


class GitHub:
    """The issues of the GitHub repository a checkout's remote names, read with `gh`, run in
    the checkout's top (gh picks the repository from there, as it does for a person)."""

    name: str = "github"

    def __init__(self, top: Path, deadline: float = DEADLINE) -> None:
        self.top = top
        self.deadline = deadline

    def fetch(self, ref: str) -> TrackedIssue:
        """The issue #ref, open or closed."""
        number = issue_number(ref)
        out = self._gh(["issue", "view", number, "--json", FIELDS], number)
        return parse_issue(out, number, self.top)

    def labelled(self, label: str, limit: int = 50) -> list[str]:
        """The numbers of the open issues labelled label, oldest first, at most limit."""
        label = checked_label(label)
        if not 1 <= limit <= MOST:
            raise UsageError(f"cannot list {limit} issues", f"ask for 1 to {MOST}")
        # with --label gh asks GitHub's search, which sorts newest first unless told: the
        # oldest `limit` are wanted, not the newest ones put in order
        out = self._gh(["issue", "list", "--label", label, "--state", "open", "--search",
                        "sort:created-asc", "--json", "number", "--limit", str(limit)], "")
        return parse_numbers(out, self.top)

    def _gh(self, args: Sequence[str], number: str) -> str:
        """What `gh ARGS` printed on stdout, run in the top; any failure raised as one
        HandoffError (number: the issue asked for, '' for a list)."""
        gh = shutil.which("gh")
        if gh is None:
            raise MissingTool("gh (GitHub CLI) is not on PATH: handoff reads GitHub issues "
                              "with it", f"install it ({GH_INSTALL}), run `gh auth login`, "
                              "then the same command again")
        # never prompt (nobody answers gh's stdin here) nor check for its own updates
        env = dict(os.environ, GH_PROMPT_DISABLED="1", GH_NO_UPDATE_NOTIFIER="1")
        command = "gh " + " ".join(args[:2])
        try:
            done = subprocess.run([gh, *args], cwd=self.top, env=env, stdin=subprocess.DEVNULL,
                                  capture_output=True, encoding="utf-8", errors="replace",
                                  timeout=self.deadline, check=False)
        except subprocess.TimeoutExpired:
            raise ExternalFailure(f"{command} did not answer within {self.deadline:.0f}s",
                                  "run it again; `gh auth status` says whether gh reaches "
                                  "GitHub") from None
        except OSError as exc:
            raise ExternalFailure(f"cannot run {gh} in {self.top}: {exc.strerror or exc}",
                                  "`gh --version` says whether it runs at all") from None
        if done.returncode != 0:
            raise failure(command, done.returncode, done.stderr or done.stdout, self.top, number)
        return done.stdout


def issue_number(ref: str) -> str:
    """ref as GitHub numbers issues ("123", also given as "#123"), without leading zeros (so
    #7 and #007 are one ticket); refused when it is no issue number."""
    found = NUMBER.fullmatch(ref.strip())
    if found is None or int(found.group(1)) == 0:
        raise UsageError(f"{said(ref)[:40]!r} is not a GitHub issue number",
                         "give the issue's number as GitHub shows it, e.g. --issue 123 or "
                         "--issue '#123'")
    return str(int(found.group(1)))


def checked_label(label: str) -> str:
    """label when gh can be asked for it as one label: gh reads --label as comma-separated
    values (quotes included), so a comma or a quote would ask for something else."""
    stripped = label.strip()
    if not stripped or len(stripped) > 50 or not stripped.isprintable() or any(
            c in stripped for c in ',"'):
        raise UsageError(f"{said(label)[:60]!r} is not a GitHub label handoff can ask for",
                         "a label is 1 to 50 printable characters, without ',' or '\"'")
    return stripped


def parse_issue(out: str, number: str, top: Path) -> TrackedIssue:
    """The issue in `gh issue view --json number,title,body,url,labels,state`'s output."""
    data = _json(out, "gh issue view", top)
    if not isinstance(data, Mapping):
        raise garbled("gh issue view", out, top)
    got, title, body, url = (data.get(k) for k in ("number", "title", "body", "url"))
    state, labels = data.get("state"), data.get("labels")
    if not (_positive(got) and isinstance(title, str) and isinstance(body, str)
            and isinstance(url, str) and isinstance(state, str) and isinstance(labels, list)):
        raise garbled("gh issue view", out, top)
    if str(got) != number:
        raise ExternalFailure(f"gh issue view {number} answered with issue #{got}",
                              f"run `gh issue view {number}` in {top} and look")
    names = [label.get("name") if isinstance(label, Mapping) else None for label in labels]
    kept = [name for name in names if isinstance(name, str)]
    if len(kept) != len(labels):
        raise garbled("gh issue view", out, top)
    # gh's issue view reads a pull request's number too: its address says which it is
    if "/pull/" in url:
        raise UsageError(f"#{number} in the GitHub repository of {top} is a pull request, "
                         "not an issue", "name an issue's number")
    return TrackedIssue(tracker=GitHub.name, ref=number, title=title, body=body, url=url,
                        labels=tuple(kept), state=state)


def parse_numbers(out: str, top: Path) -> list[str]:
    """The issue numbers in `gh issue list --json number`'s output, oldest (lowest) first."""
    data = _json(out, "gh issue list", top)
    if not isinstance(data, list):
        raise garbled("gh issue list", out, top)
    rows = [row.get("number") if isinstance(row, Mapping) else None for row in data]
    numbers = [number for number in rows if _positive(number)]
    if len(numbers) != len(data):
        raise garbled("gh issue list", out, top)
    # GitHub numbers issues as they are made: in number order is in the order they were opened
    return [str(number) for number in sorted(set(numbers))]


def failure(command: str, status: int, output: str, top: Path, number: str = "") -> HandoffError:
    """The one error a person sees for gh having failed with status and output (its stderr),
    gh's own words quoted without credentials or control characters."""
    words = said(last_words(output, status))
    if any(w in output for w in NO_REPOSITORY):
        # before the login: gh's "none of the git remotes … point to a known GitHub host"
        # also says `gh auth login`, yet a login would not mend it
        return ExternalFailure(f"gh finds no GitHub repository for {top}: {words}",
                               "gh reads the repository from the checkout's remotes: add one "
                               "on GitHub, or pick one with `gh repo set-default`")
    if status == EXIT_AUTH or any(w in output for w in NO_LOGIN):
        return ExternalFailure(f"gh is not logged in to GitHub: {words}",
                               "run `gh auth login` (handoff uses your own gh and its login; it "
                               "keeps no token)")
    if number and "Could not resolve to an issue or pull request" in output:
        return NotFound(f"issue #{number} not found in the GitHub repository of {top}",
                        f"`gh issue list` in {top} lists its open issues")
    if "Could not resolve to a Repository" in output:
        return NotFound(f"the GitHub repository of {top} is not found: {words}",
                        "gh reads it from the checkout's remote: check its address and that "
                        "your login may read it (`gh auth status`)")
    if "has disabled issues" in output:
        return NotFound(f"the GitHub repository of {top} has no issues: {words}",
                        "its issues are turned off in the repository's settings")
    return ExternalFailure(f"{command} failed: {words}",
                           f"`gh auth status` says whether gh is logged in; run the same gh "
                           f"command in {top} to see more")


def garbled(command: str, out: str, top: Path) -> ExternalFailure:
    """gh answered, but not with the JSON asked for (an old gh, a wrapper, a proxy's page)."""
    quoted = said(out.strip())
    shown = quoted[:QUOTED] + ("…" if len(quoted) > QUOTED else "")
    return ExternalFailure(f"{command} printed something that is not the JSON handoff asked for: "
                           f"{shown!r}", f"`gh --version` says which gh runs in {top}; "
                           "handoff needs the GitHub CLI 2.x")


def said(text: str) -> str:
    """Words from outside, fit for a message: one line, no control characters, no URL's
    credentials."""
    clean: str = printable(redact(" ".join(text.split())))
    return clean


def _json(out: str, command: str, top: Path) -> object:
    try:
        data: object = json.loads(out)
    except ValueError:
        raise garbled(command, out, top) from None
    return data


def _positive(value: object) -> TypeGuard[int]:
    """A positive JSON integer (a bool is an int to Python, never to JSON)."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
