"""`handoff finish --push` and `--pr` (handoff.operations.forge), and the credentials a remote's
URL holds kept from peers (handoff.machinery.credentials): a local bare remote, a `gh`
stand-in on PATH that records what it was given, the real CLI, git and bubblewrap."""

from __future__ import annotations

from handoff.machinery.credentials import redact

TOKEN = "ghp_s3cretTOKEN42"
FORGE_URL = f"https://bot:{TOKEN}@github.com/team/calc.git"


def test_redact_takes_out_userinfo_and_extra_headers() -> None:
    text = (f"[remote \"forge\"]\n\turl = {FORGE_URL}\n[url \"https://u:p@host/\"]\n"
            "\tinsteadOf = https://host/\n[http]\n\textraHeader = AUTHORIZATION: basic xyz\n"
            "\turl = git@github.com:team/calc.git\n")
    clean = redact(text)
    assert TOKEN not in clean and "u:p@" not in clean and "basic xyz" not in clean
    assert "url = https://github.com/team/calc.git" in clean
    assert "git@github.com:team/calc.git" in clean, "an ssh address holds no secret"
    assert redact(clean) == clean


def test_a_pull_request_of_a_github_issues_ticket_closes_the_issue_and_no_other() -> None:
    from handoff.operations.forge import closing_line

    assert closing_line("https://github.com/team/calc/issues/7") == "Fixes #7\n\n"
    for other in ("", "https://gitlab.com/team/calc/-/issues/7",
                  "https://github.com/team/calc/pull/7", "https://github.com/team/calc/issues/7x"):
        assert closing_line(other) == "", other
