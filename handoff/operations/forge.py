"""`handoff finish --push` and `--pr`: a passed ticket's reviewed commit pushed as its branch,
and a pull request opened with the person's own `gh`, when a person asks.

Nothing else in handoff pushes. The push names the reviewed commit and the ticket's branch
(`git push REMOTE <commit>:refs/heads/handoff/T`), never the base and never with force: a
branch that moved on the remote is refused by git and said. Both run outside every peer's
fence with the person's own environment and credentials, from the repository's top; what they
print is said with every URL's credentials taken out, and no event holds a URL's userinfo.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

from handoff.errors import ExternalFailure, MissingTool, UsageError
from handoff.inputs import clip
from handoff.machinery.credentials import redact
from handoff.machinery.repo import Repo, git, run, short_sha

#: seconds a push or gh may take
DEADLINE = 120.0
GH_INSTALL = "https://cli.github.com"


@dataclass(frozen=True)
class Pushed:
    ticket: str
    remote: str
    #: the remote's URL without its credentials
    url: str
    branch: str
    commit: str
    #: the pull request's address ('' : none was opened)
    pull_request: str = ""
    #: what the forge needs, when no pull request was opened
    next: str = ""

    @property
    def said(self) -> list[str]:
        lines = [f"{self.ticket}: pushed {short_sha(self.commit)} to {self.remote} as "
                 f"{self.branch} ({self.url}); the base was not pushed"]
        if self.pull_request:
            lines.append(f"{self.ticket}: pull request {self.pull_request}")
        elif self.next:
            lines.append(f"{self.ticket}: {self.next}")
        return lines


def remote_for(repo: Repo, base: str, named: str | None) -> str:
    """The remote to push to: the one named, else the base branch's own, else the only one."""
    remotes = git(repo.top, "remote").split()
    if named:
        if named not in remotes:
            raise UsageError(f"there is no remote {named!r} in {repo.top}",
                             f"its remotes: {', '.join(remotes) or 'none'} ('git remote -v')")
        return named
    status, out = run(repo.top, "config", "--get", f"branch.{base}.remote", check=False)
    if status == 0 and out.strip() in remotes:
        return out.strip()
    if len(remotes) == 1:
        return remotes[0]
    raise UsageError(f"{base} has no remote of its own, and {repo.top} has "
                     f"{len(remotes) or 'no'} remote(s): which one is meant is not clear",
                     "name it: --remote NAME" if remotes else
                     "add one ('git remote add origin URL'), then --push again")


def url_of(repo: Repo, remote: str) -> str:
    """Where remote pushes to, its credentials taken out."""
    status, out = run(repo.top, "remote", "get-url", "--push", remote, check=False)
    return redact(out.strip()) if status == 0 else remote


def push(repo: Repo, remote: str, commit: str, branch: str) -> None:
    """The commit pushed as branch on remote, never forced."""
    status, out = run(repo.top, "push", "--porcelain", remote,
                      f"{commit}:refs/heads/{branch}", check=False, timeout=DEADLINE)
    if status != 0:
        raise ExternalFailure(f"git push to {remote} refused {branch}: "
                              f"{clip(redact(out.strip()), 600) or f'exit {status}'}",
                              f"nothing was forced; if {branch} moved on {remote}, look at it "
                              "there; the ticket stays passed")


def compare(url: str, base: str, branch: str) -> str:
    """Where a person opens the pull request by hand, for the forges whose address is known."""
    found = re.match(r"^(?:https?://|ssh://git@|git@)(github\.com|gitlab\.com)[:/](.+?)"
                     r"(?:\.git)?/?$", url)
    if found is None:
        return f"open a pull request from {branch} into {base} on your forge"
    host, path = found.groups()
    if host == "github.com":
        return f"open the pull request: https://github.com/{path}/compare/{base}...{branch}?expand=1"
    return (f"open the merge request: https://gitlab.com/{path}/-/merge_requests/new?"
            f"merge_request[source_branch]={branch}&merge_request[target_branch]={base}")


def closing_line(source: str) -> str:
    """What a pull request's body starts with for a ticket from a GitHub issue: the keyword
    that closes the issue when the request is merged ('' for any other ticket)."""
    found = re.fullmatch(r"https://github\.com/[^/\s]+/[^/\s]+/issues/(\d+)", source)
    return f"Fixes #{found.group(1)}\n\n" if found else ""


def open_pull_request(repo: Repo, base: str, branch: str, title: str, body: str) -> str:
    """A pull request from branch into base, opened by the person's `gh` (their login, their
    environment); its address."""
    gh = shutil.which("gh")
    if gh is None:
        raise MissingTool(f"gh (GitHub CLI) is not on PATH: no pull request was opened for "
                          f"{branch}, which is pushed", f"install it ({GH_INSTALL}) and run "
                          "the same finish again, or open the pull request yourself")
    try:
        done = subprocess.run([gh, "pr", "create", "--base", base, "--head", branch, "--title",
                               title, "--body-file", "-"], cwd=repo.top, input=body,
                              capture_output=True, text=True, timeout=DEADLINE, check=False)
    except subprocess.TimeoutExpired:
        raise ExternalFailure(f"gh pr create did not end within {DEADLINE:.0f}s", "run it "
                              "again; the branch is pushed") from None
    if done.returncode != 0:
        said = redact((done.stderr or done.stdout).strip())
        raise ExternalFailure(f"gh pr create failed: {clip(said, 600) or done.returncode}",
                              "'gh auth status' says whether gh is logged in; the branch is "
                              "pushed")
    lines = [line.strip() for line in done.stdout.splitlines() if line.strip()]
    return redact(lines[-1]) if lines else ""
