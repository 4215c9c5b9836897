"""handoff.trackers.github without a process: which refs and labels are asked for, gh's JSON
read into an issue, and each way gh fails (in gh's own words, from cli/cli's source) turned
into one error with a hint. tests/integration/trackers/test_github.py runs a gh stand-in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from handoff.errors import (
    EXIT_MISSING_TOOL,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    ExternalFailure,
    HandoffError,
    MissingTool,
    NotFound,
    UsageError,
)
from handoff.trackers import Tracker
from handoff.trackers.github import (
    GitHub,
    checked_label,
    failure,
    issue_number,
    parse_issue,
    parse_numbers,
)

TOP = Path("/work/calc")
TOKEN = "ghp_s3cretTOKEN42"
#: what `gh issue view 123 --json number,title,body,url,labels,state` prints (gh 2.x)
VIEWED = {"body": "Run `calc 1/0`.\r\n\r\nIt crashes.", "labels": [
    {"id": "LA_kwDOAbc", "name": "bug", "description": "Something isn't working",
     "color": "d73a4a"},
    {"id": "LA_kwDOAbd", "name": "handoff", "description": "", "color": "ededed"}],
    "number": 123, "state": "OPEN", "title": "Divide by zero crashes",
    "url": "https://github.com/team/calc/issues/123"}
#: gh's words (cli/cli: pkg/cmd/root/help.go, internal/ghcmd/cmd.go, the GraphQL API's)
LOGGED_OUT = ("To get started with GitHub CLI, please run:  gh auth login\n"
              "Alternatively, populate the GH_TOKEN environment variable with a GitHub API "
              "authentication token.\n")
BAD_TOKEN = ("HTTP 401: Bad credentials (https://api.github.com/graphql)\n"
             "Try authenticating with:  gh auth login\n")
NO_ISSUE = ("GraphQL: Could not resolve to an issue or pull request with the number of 999. "
            "(repository.issue)\n")
NO_GITHUB_REMOTE = ("none of the git remotes configured for this repository point to a known "
                    "GitHub host. To tell gh about a new GitHub host, please use `gh auth login`\n")
NO_GIT = ("failed to run git: fatal: not a git repository (or any of the parent directories): "
          ".git\n")
NO_DEFAULT = ("X No default remote repository has been set for this directory.\n"
              "please run `gh repo set-default` to select a default remote repository.\n")
NO_REPO = "GraphQL: Could not resolve to a Repository with the name 'team/gone'. (repository)\n"
NO_ISSUES = "the 'team/calc' repository has disabled issues\n"


def viewed(**changed: object) -> str:
    return json.dumps({**VIEWED, **changed})


@pytest.mark.parametrize("ref, number", [("123", "123"), ("#123", "123"), (" 42\n", "42"),
                                         ("007", "7"), ("999999999", "999999999")])
def test_an_issue_number_as_a_person_types_it(ref: str, number: str) -> None:
    assert issue_number(ref) == number


@pytest.mark.parametrize("ref", ["", "#", "0", "#0", "abc", "12a", "1 2", "-1", "+1", "1.0",
                                 "１２", "١٢", "1234567890", "12; rm -rf ~", "##12",
                                 "https://github.com/team/calc/issues/12"])
def test_anything_but_an_issue_number_is_refused_naming_it(ref: str) -> None:
    with pytest.raises(UsageError) as raised:
        issue_number(ref)
    assert raised.value.exit_code == EXIT_USAGE
    assert raised.value.message == f"{' '.join(ref.split())[:40]!r} is not a GitHub issue number"
    assert "--issue 123" in raised.value.hint


def test_a_refused_ref_is_shown_without_control_characters() -> None:
    with pytest.raises(UsageError) as raised:
        issue_number("\x1b]0;owned\x07" + "9" * 80)
    assert "\x1b" not in raised.value.message and "\x07" not in raised.value.message
    assert raised.value.message.startswith("']0;owned999")


@pytest.mark.parametrize("label", ["handoff", "good first issue", "  bug  ", "área: ui"])
def test_a_label_is_asked_for_as_it_is(label: str) -> None:
    assert checked_label(label) == label.strip()


@pytest.mark.parametrize("label", ["", "  ", "a,b", '"bug"', "x" * 51, "bug\x1b[31m", "a\nb"])
def test_a_label_gh_would_read_as_something_else_is_refused(label: str) -> None:
    with pytest.raises(UsageError, match="is not a GitHub label handoff can ask for"):
        checked_label(label)


def test_gh_json_becomes_a_clean_tracked_issue() -> None:
    issue = parse_issue(viewed(), "123", TOP)
    assert (issue.tracker, issue.ref, issue.ticket_id) == ("github", "123", "gh-123")
    assert issue.title == "Divide by zero crashes"
    assert issue.body == "Run `calc 1/0`.\n\nIt crashes.", "GitHub's CRLF read as lines"
    assert issue.url == "https://github.com/team/calc/issues/123"
    assert issue.labels == ("bug", "handoff") and issue.state == "open"


def test_a_closed_issue_is_read_and_says_so() -> None:
    issue = parse_issue(viewed(state="CLOSED", labels=[], body=""), "123", TOP)
    assert issue.state == "closed" and issue.labels == () and issue.body == ""
    assert issue.text == ("# Divide by zero crashes\n\n(from https://github.com/team/calc/"
                          "issues/123; the issue is closed)\n")


def test_what_an_issue_holds_is_cleaned_on_the_way_in() -> None:
    issue = parse_issue(viewed(title="\x1b[2J\x1b[HPwn\x1b]0;t\x07ed", body="a\x00b\x9bc",
                               labels=[{"name": "\x1b[5mbug"}]), "123", TOP)
    assert (issue.title, issue.body, issue.labels) == ("Pwned", "abc", ("bug",))


def test_a_pull_requests_number_is_refused() -> None:
    with pytest.raises(UsageError, match=r"^#7 in the GitHub repository of /work/calc is a pull "
                                         "request, not an issue$"):
        parse_issue(viewed(number=7, url="https://github.com/team/calc/pull/7", state="MERGED"),
                    "7", TOP)


def test_an_answer_about_another_issue_is_refused() -> None:
    with pytest.raises(ExternalFailure, match=r"^gh issue view 124 answered with issue #123$"):
        parse_issue(viewed(), "124", TOP)


@pytest.mark.parametrize("out", [
    "<html><title>Proxy login</title></html>", "", "null", "[]", '"text"',
    json.dumps({k: v for k, v in VIEWED.items() if k != "body"}),
    viewed(number="123"), viewed(number=True), viewed(title=None), viewed(labels="bug"),
    viewed(labels=["bug"]), viewed(labels=[{"name": 5}]), viewed(state=1)])
def test_anything_but_the_issues_json_is_a_failure_naming_what_gh_printed(out: str) -> None:
    with pytest.raises(ExternalFailure) as raised:
        parse_issue(out, "123", TOP)
    assert raised.value.message.startswith(
        "gh issue view printed something that is not the JSON handoff asked for: ")
    assert raised.value.message.endswith(repr(" ".join(out.split())[:200]) if len(out) <= 200
                                         else "…'")
    assert "gh --version" in raised.value.hint


def test_garbage_is_quoted_short_without_credentials_or_escapes() -> None:
    out = f"\x1b[31mproxy: https://bot:{TOKEN}@github.com refused\x1b[0m\n" + "z" * 500
    with pytest.raises(ExternalFailure) as raised:
        parse_issue(out, "123", TOP)
    message = raised.value.message
    assert TOKEN not in message and "\x1b" not in message and "\n" not in message
    assert "proxy: https://github.com refused" in message
    assert message.endswith("z…'") and len(message) < 300


def test_the_numbers_of_a_list_oldest_first() -> None:
    out = json.dumps([{"number": 12}, {"number": 3}, {"number": 7}, {"number": 3}])
    assert parse_numbers(out, TOP) == ["3", "7", "12"]
    assert parse_numbers("[]", TOP) == []


@pytest.mark.parametrize("out", ["{}", "[1, 2]", '[{"number": "3"}]', '[{"number": 0}]',
                                 '[{"id": 3}]', "oops"])
def test_a_list_that_is_not_numbers_is_a_failure(out: str) -> None:
    with pytest.raises(ExternalFailure, match=r"^gh issue list printed something that is not"):
        parse_numbers(out, TOP)


def _one_line(error: HandoffError) -> None:
    assert "\n" not in error.message and error.hint, (error.message, error.hint)


@pytest.mark.parametrize("status, output", [(4, LOGGED_OUT), (1, BAD_TOKEN), (4, "")])
def test_gh_without_a_login_says_to_log_in(status: int, output: str) -> None:
    error = failure("gh issue view", status, output, TOP, "123")
    assert type(error) is ExternalFailure and error.message.startswith("gh is not logged in")
    assert "run `gh auth login`" in error.hint and "keeps no token" in error.hint
    _one_line(error)


def test_an_issue_that_does_not_exist_is_not_found() -> None:
    error = failure("gh issue view", 1, NO_ISSUE, TOP, "999")
    assert isinstance(error, NotFound) and error.exit_code == EXIT_NOT_FOUND
    assert error.message == "issue #999 not found in the GitHub repository of /work/calc"
    assert "gh issue list" in error.hint


@pytest.mark.parametrize("output", [NO_GITHUB_REMOTE, NO_GIT, NO_DEFAULT])
def test_a_checkout_gh_finds_no_github_repository_for_is_no_login_problem(output: str) -> None:
    error = failure("gh issue view", 1, output, TOP, "5")
    assert type(error) is ExternalFailure
    assert error.message.startswith("gh finds no GitHub repository for /work/calc: ")
    assert "gh repo set-default" in error.hint and "auth login" not in error.hint
    _one_line(error)


def test_a_repository_gone_or_without_issues_is_not_found() -> None:
    gone = failure("gh issue list", 1, NO_REPO, TOP)
    assert isinstance(gone, NotFound) and "Could not resolve to a Repository with the name " \
        "'team/gone'" in gone.message
    off = failure("gh issue view", 1, NO_ISSUES, TOP, "5")
    assert isinstance(off, NotFound) and off.message == (
        "the GitHub repository of /work/calc has no issues: the 'team/calc' repository has "
        "disabled issues")


def test_any_other_failure_quotes_gh_without_credentials_or_escapes() -> None:
    output = (f"warming up\nerror connecting to https://bot:{TOKEN}@github.com\x1b[31m\n"
              "\x1b]0;owned\x07timeout\n")
    error = failure("gh issue view", 1, output, TOP, "5")
    assert type(error) is ExternalFailure
    assert error.message == ("gh issue view failed: warming up / error connecting to "
                             "https://github.com[31m / ]0;ownedtimeout")
    assert "gh auth status" in error.hint
    assert failure("gh issue view", 3, "", TOP).message == "gh issue view failed: exit 3"


def test_without_gh_on_path_the_error_says_how_to_install_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    github = GitHub(tmp_path)
    for ask in (lambda: github.fetch("12"), lambda: github.labelled("handoff")):
        with pytest.raises(MissingTool) as raised:
            ask()
        assert raised.value.exit_code == EXIT_MISSING_TOOL
        assert raised.value.message.startswith("gh (GitHub CLI) is not on PATH")
        assert "https://cli.github.com" in raised.value.hint


def test_a_bad_ref_label_or_limit_is_refused_before_gh_is_looked_for(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no gh: a UsageError shows none was looked for
    github = GitHub(tmp_path)
    with pytest.raises(UsageError, match="is not a GitHub issue number"):
        github.fetch("HEAD~1")
    with pytest.raises(UsageError, match="is not a GitHub label"):
        github.labelled("a,b")
    for limit in (0, 1001):
        with pytest.raises(UsageError, match=f"cannot list {limit} issues"):
            github.labelled("handoff", limit)


def test_github_is_a_tracker(tmp_path: Path) -> None:
    tracker: Tracker = GitHub(tmp_path)  # mypy checks it against the protocol
    assert tracker.name == "github" and GitHub(tmp_path).top == tmp_path
