"""handoff.trackers.github running `gh`: a stand-in gh first on PATH that serves issues from a
folder of JSON files, records every argv it was given and where it ran, and can be logged out,
print garbage or never answer, with the exit codes and words of the real gh (cli/cli)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from handoff.errors import ExternalFailure, MissingTool, NotFound
from handoff.trackers.github import GitHub

TOKEN = "ghp_s3cretTOKEN42"

#: the stand-in: argv in, what gh would print out. Its folder holds issues/<n>.json (an issue
#: as GitHub has it: every field gh can print), `mode` (logged-out, garbage, leaky, hang) and
#: the argv it was run with (said.jsonl, one line a run)
GH = r'''
import json, os, signal, sys
from pathlib import Path

here = Path(__file__).resolve().parent.parent
args = sys.argv[1:]
with open(here / "said.jsonl", "a") as said:
    said.write(json.dumps({"argv": args, "cwd": os.getcwd(),
                           "prompt": os.environ.get("GH_PROMPT_DISABLED")}) + "\n")
mode = (here / "mode").read_text().strip() if (here / "mode").exists() else ""
if mode == "logged-out":  # cli/cli pkg/cmd/root/help.go; exit 4 is its exitAuth
    sys.stderr.write("To get started with GitHub CLI, please run:  gh auth login\n"
                     "Alternatively, populate the GH_TOKEN environment variable with a GitHub "
                     "API authentication token.\n")
    sys.exit(4)
if mode == "garbage":  # a proxy's page where the API's answer should be
    print("<html><body>Sign in to the proxy</body></html>")
    sys.exit(0)
if mode == "leaky":
    sys.stderr.write("error connecting to https://bot:" + os.environ["LEAKED"] + "@github.com\n")
    sys.exit(1)
if mode == "hang":
    signal.pause()


def option(name):
    return args[args.index(name) + 1] if name in args else None


issues = {int(p.stem): json.loads(p.read_text()) for p in (here / "issues").glob("*.json")}
fields = option("--json").split(",")
if args[:2] == ["issue", "view"]:
    number = int(args[2])
    if number not in issues:
        sys.stderr.write("GraphQL: Could not resolve to an issue or pull request with the "
                         f"number of {number}. (repository.issue)\n")
        sys.exit(1)
    print(json.dumps({f: issues[number][f] for f in fields}))
elif args[:2] == ["issue", "list"]:
    state, label = option("--state").upper(), option("--label")
    found = [i for i in issues.values() if i["state"] == state
             and label in [lab["name"] for lab in i["labels"]]]
    # GitHub's search: newest first, unless the query sorts otherwise
    found.sort(key=lambda i: i["number"],
               reverse="sort:created-asc" not in (option("--search") or ""))
    print(json.dumps([{f: i[f] for f in fields} for i in found[:int(option("--limit"))]]))
else:
    sys.stderr.write(f"unknown command {args!r}\n")
    sys.exit(1)
'''


def gh_issue(number: int, title: str, body: str = "", labels: tuple[str, ...] = (),
             state: str = "OPEN") -> dict[str, object]:
    """An issue as gh prints it with every field handoff may ask for, and some it does not."""
    return {"number": number, "title": title, "body": body, "state": state,
            "url": f"https://github.com/team/calc/issues/{number}",
            "labels": [{"id": f"LA_{name}", "name": name, "description": "", "color": "ededed"}
                       for name in labels],
            "author": {"login": "someone"}, "comments": [], "createdAt": "2024-05-01T10:00:00Z"}


class StandIn:
    """The gh stand-in's folder: its issues, its mode, and what it was given."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def add(self, issue: dict[str, object]) -> None:
        (self.folder / "issues" / f"{issue['number']}.json").write_text(json.dumps(issue))

    def act(self, mode: str) -> None:
        (self.folder / "mode").write_text(mode)

    def said(self) -> list[dict[str, str | list[str]]]:
        record = self.folder / "said.jsonl"
        return [json.loads(line) for line in record.read_text().splitlines()] \
            if record.exists() else []


def made_stand_in(folder: Path) -> StandIn:
    """The stand-in in folder: its gh (a Python script of this interpreter) in folder/bin."""
    (folder / "bin").mkdir(parents=True)
    (folder / "issues").mkdir()
    script = folder / "bin" / "gh"
    script.write_text(f"#!{sys.executable}\n{GH}")
    script.chmod(0o755)
    return StandIn(folder)


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> StandIn:
    """gh alone on PATH."""
    made = made_stand_in(tmp_path / "gh")
    monkeypatch.setenv("PATH", str(made.folder / "bin"))
    return made


@pytest.fixture
def top(tmp_path: Path) -> Path:
    """The checkout's top gh runs in (the stand-in reads no repository from it)."""
    checkout = tmp_path / "calc"
    checkout.mkdir()
    return checkout


def test_an_issue_is_read_with_gh_in_the_checkouts_top(stand_in: StandIn, top: Path) -> None:
    stand_in.add(gh_issue(123, "Divide by zero crashes", "Run `calc 1/0`.\r\n\r\nIt crashes.",
                          labels=("bug", "handoff")))
    issue = GitHub(top).fetch("#123")
    assert (issue.ticket_id, issue.title, issue.state) == ("gh-123", "Divide by zero crashes",
                                                           "open")
    assert issue.body == "Run `calc 1/0`.\n\nIt crashes."
    assert issue.labels == ("bug", "handoff")
    assert issue.url == "https://github.com/team/calc/issues/123"
    assert issue.text == ("# Divide by zero crashes\n\nRun `calc 1/0`.\n\nIt crashes.\n\n"
                          "(from https://github.com/team/calc/issues/123; labels: bug, handoff)\n")
    [said] = stand_in.said()
    assert said["argv"] == ["issue", "view", "123", "--json", "number,title,body,url,labels,state"]
    assert Path(str(said["cwd"])).resolve() == top.resolve()
    assert said["prompt"] == "1", "gh never waits for an answer nobody gives"


def test_a_closed_issue_is_read_all_the_same(stand_in: StandIn, top: Path) -> None:
    stand_in.add(gh_issue(8, "Old", "done already", state="CLOSED"))
    issue = GitHub(top).fetch("8")
    assert issue.state == "closed" and issue.body == "done already"


def test_the_open_issues_of_a_label_oldest_first(stand_in: StandIn, top: Path) -> None:
    for number, labels, state in [(3, ("handoff",), "OPEN"), (5, ("bug", "handoff"), "OPEN"),
                                  (9, ("handoff",), "OPEN"), (4, ("handoff",), "CLOSED"),
                                  (6, ("bug",), "OPEN")]:
        stand_in.add(gh_issue(number, f"issue {number}", labels=labels, state=state))
    github = GitHub(top)
    assert github.labelled("handoff") == ["3", "5", "9"]
    assert github.labelled("handoff", limit=2) == ["3", "5"], "the oldest two, not the newest"
    assert github.labelled("nobody-uses-this") == []
    first = stand_in.said()[0]["argv"]
    assert first[:6] == ["issue", "list", "--label", "handoff", "--state", "open"]
    assert first[first.index("--json") + 1] == "number"
    assert first[first.index("--limit") + 1] == "50", "the limit a caller leaves alone"


def test_an_issue_that_does_not_exist_is_not_found(stand_in: StandIn, top: Path) -> None:
    stand_in.add(gh_issue(1, "one"))
    with pytest.raises(NotFound) as raised:
        GitHub(top).fetch("999")
    assert raised.value.message == f"issue #999 not found in the GitHub repository of {top}"


def test_without_gh_on_path_nothing_runs_and_the_error_says_how_to_install_it(
        top: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "no-gh"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(MissingTool) as raised:
        GitHub(top).fetch("1")
    assert raised.value.message.startswith("gh (GitHub CLI) is not on PATH")
    assert "https://cli.github.com" in raised.value.hint


def test_gh_not_logged_in_says_to_log_in(stand_in: StandIn, top: Path) -> None:
    stand_in.add(gh_issue(1, "one"))
    stand_in.act("logged-out")
    for ask in (lambda: GitHub(top).fetch("1"), lambda: GitHub(top).labelled("handoff")):
        with pytest.raises(ExternalFailure) as raised:
            ask()
        assert raised.value.message.startswith("gh is not logged in to GitHub: To get started")
        assert "run `gh auth login`" in raised.value.hint
        assert "\n" not in raised.value.message


def test_gh_printing_garbage_is_a_failure_that_quotes_it(stand_in: StandIn, top: Path) -> None:
    stand_in.act("garbage")
    with pytest.raises(ExternalFailure) as raised:
        GitHub(top).fetch("1")
    assert raised.value.message == ("gh issue view printed something that is not the JSON "
                                    "handoff asked for: '<html><body>Sign in to the proxy"
                                    "</body></html>'")
    with pytest.raises(ExternalFailure, match=r"^gh issue list printed something that is not"):
        GitHub(top).labelled("handoff")


def test_what_gh_says_when_it_fails_is_quoted_without_credentials(
        stand_in: StandIn, top: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEAKED", TOKEN)
    stand_in.act("leaky")
    with pytest.raises(ExternalFailure) as raised:
        GitHub(top).fetch("1")
    assert raised.value.message == "gh issue view failed: error connecting to https://github.com"
    assert all(TOKEN not in arg for run in stand_in.said() for arg in run["argv"])


def test_gh_that_never_answers_is_given_up_on(stand_in: StandIn, top: Path) -> None:
    stand_in.act("hang")
    with pytest.raises(ExternalFailure, match=r"^gh issue view did not answer within 1s$"):
        GitHub(top, deadline=1.0).fetch("1")


def test_an_issue_holding_escape_sequences_comes_back_clean(stand_in: StandIn, top: Path) -> None:
    stand_in.add(gh_issue(13, "\x1b]0;owned\x07Fix \x1b[31mred\x1b[0m login\x1b[2J",
                          "Log:\r\n\x1b[1;31mERROR\x1b[0m boom\x07\r\n\x1b[H\x1b[2J\tdone\x9b\x00",
                          labels=("\x1b[5mbug",)))
    issue = GitHub(top).fetch("13")
    assert issue.title == "Fix red login"
    assert issue.body == "Log:\nERROR boom\n\tdone"
    assert issue.labels == ("bug",)
    assert "\x1b" not in issue.text and "\x07" not in issue.text
