"""The commands about handoff itself rather than one ticket: set it up in a repository
(`init`), check the machine and its coding CLIs (`doctor`, `providers`), clean up what it left
behind (`gc`, here and on every host), and try the whole loop on a throwaway repo (`demo`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from handoff.cli import running
from handoff.cli.options import JsonOpt, RepoOpt
from handoff.errors import HandoffError


def init(repo: RepoOpt = None) -> None:
    """Write a commented .handoff.yaml into the repo (never overwriting one)."""
    from handoff.config import REPO_CONFIG, config_template
    from handoff.machinery import tools
    from handoff.machinery.repo import Repo
    from handoff.operations import doctor

    for problem in tools.problems():
        typer.echo(f"warning: {problem}", err=True)
    picked = doctor.pick()
    path = config_template(Repo.at(repo or Path.cwd()).top, picked.implementer, picked.reviewer,
                           picked.security)
    if path is None:
        typer.echo(f"{REPO_CONFIG} exists; leaving it alone")
        return
    found = ", ".join(picked.installed) if picked.installed else \
        "no coding CLI (claude, codex, gemini, opencode)"
    security = (f", security reviewer {picked.security} (a second CLI: it reviews every round "
                "beside the reviewer; remove roles.security to do without)") if picked.security \
        else ("; no security reviewer: it needs a second installed CLI to be independent (add "
              "roles.security by hand to have one anyway)" if picked.installed else "")
    typer.echo(f"found on PATH: {found}\nchose: implementer {picked.implementer}, reviewer "
               f"{picked.reviewer}{security}"
               + (" (the built-in scripted agent: install a CLI and edit the file)"
                  if not picked.installed else ""))
    typer.echo(f"wrote {path}\ncommit it with your code (handoff finish refuses a checkout with "
               f"untracked files): git add {REPO_CONFIG} && git commit -m 'handoff config'\n"
               "next: handoff doctor, then handoff start TICKET --plan plan.md")


def _repo_top(repo: Path | None) -> Path | None:
    """The repo named, else the one here; None when here is no repo (a named one must be)."""
    from handoff.machinery.repo import Repo

    try:
        return Repo.at(repo or Path.cwd()).top
    except HandoffError:
        if repo is not None:
            raise
        return None


def doctor_command(repo: RepoOpt = None, as_json: JsonOpt = False) -> None:
    """Check tmux, git, the configured CLIs and their set-up: OK, WARN or FAIL with the fix."""
    from handoff.operations import doctor
    from handoff.providers.base import Level  # here: the providers are a third of --help
    from handoff.record.store import state_home

    top = _repo_top(repo)
    found = doctor.run(state_home(), top)
    if top is None:
        typer.echo("(not in a git repository: repo checks skipped; pass --repo PATH)",
                   err=as_json)  # the JSON on stdout stays one document
    if as_json:
        typer.echo(json.dumps([{"level": c.level, "what": c.what, "detail": c.detail,
                                "fix": c.fix} for c in found], indent=2))
        raise typer.Exit(doctor.exit_code(found))
    for check in found:
        typer.echo(f"{check.level:<4}  {check.what}: {check.detail}")
        if check.fix and check.level != Level.OK:
            typer.echo(f"      fix: {check.fix}")
    raise typer.Exit(doctor.exit_code(found))


def providers(repo: RepoOpt = None, as_json: JsonOpt = False) -> None:
    """The coding CLIs handoff can run, what is installed, and which roles use them."""
    from handoff.config import load as load_config
    from handoff.operations import doctor
    from handoff.record.store import state_home

    rows = doctor.provider_rows(load_config(state_home(), _repo_top(repo)))
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    typer.echo(f"{'PROVIDER':<10} {'VERSION':<10} {'PROVEN':<20} {'ROLES':<22} {'PATH':<40} "
               "SUPPORT")
    for row in rows:
        roles = ",".join(row["roles"]) if isinstance(row["roles"], list) else ""
        typer.echo(f"{row['provider']!s:<10} {row['version'] or '-'!s:<10} "
                   f"{row['proven'] or '-'!s:<20} {roles or '-':<22} "
                   f"{row['path'] or 'not installed'!s:<40} {row['support']}")
        notes = [row["unproven"], row["reaches"] if roles else None]
        for note in filter(None, notes):
            typer.echo(f"{'':<10} {note}")


def gc_command(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would be removed; "
                                          "remove nothing.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Remove dirty worktrees too, their "
                                        "changes first saved as a patch.")] = False,
    prune_records: Annotated[bool, typer.Option("--prune-records", help="Delete the records "
                                                "of tickets whose repository is gone.")] = False,
    older_than: Annotated[float | None, typer.Option(
        "--older-than", metavar="DAYS", min=0, help="Forget the records of tickets closed more "
        "than DAYS days ago, as 'handoff forget' does (their branches stay).",
        show_default=False)] = None,
    repo: RepoOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Remove what handoff left behind that no live ticket owns: sessions, worktrees, sockets."""
    from handoff.operations import gc as gc_mod
    from handoff.record.store import state_home

    home = state_home()
    found = [item.fields() for item in gc_mod.collect(home, gc_mod.Options(
        dry_run=dry_run, force=force, prune_records=prune_records, repo=_repo_top(repo),
        older_than=older_than))]
    if (home / "config.yaml").is_file():
        from handoff import config
        from handoff.operations import hosts

        found += hosts.gc_on(home, config.load(home, None), dry_run, force, prune_records)
    if as_json:
        typer.echo(json.dumps(found, indent=2))
        return
    for item in found:
        done = "removed" if item["removed"] else "would remove" if item["removable"] and \
            dry_run else "not removed" if item["removable"] else "kept"
        where = f"{item['host']}: " if item.get("host") else ""
        typer.echo(f"{done:<12} {where}{item['kind']} {item['path']}: {item['why']}"
                   + (f" (changes saved as {item['saved']})" if item["saved"] else ""))
    removed = sum(bool(item["removed"]) for item in found)
    kept = sum(not item["removable"] for item in found)
    if not found:
        typer.echo("gc: nothing to clean up")
    elif dry_run:
        typer.echo(f"gc (dry run): would remove {sum(bool(i['removable']) for i in found)}, "
                   f"keep {kept}")
    else:
        typer.echo(f"gc: removed {removed}, kept {kept}")


def demo(keep: Annotated[bool, typer.Option("--keep", help="Leave the session and worktrees "
                                            "for 'handoff attach'.")] = False) -> None:
    """Run the whole loop on a throwaway repo with the scripted agents (no AI needed)."""
    from handoff.operations import demo as demo_mod
    from handoff.operations.render import event_line
    from handoff.record.store import state_home

    result, state, ws = demo_mod.run(state_home(), keep, typer.echo,
                                     lambda event: typer.echo(event_line(event)))
    raise typer.Exit(running.outcome(ws, state, result))
