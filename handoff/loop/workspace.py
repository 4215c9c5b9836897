"""One ticket's working parts put together: its directory, repo, worktrees, peers, providers.

The orchestrator drives these through the loop; the CLI's one-off commands (recycle, stop,
close, attach) use the same pieces, so both act on a ticket in exactly the same way.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from handoff import config as config_mod
from handoff import trace
from handoff.config import Config
from handoff.errors import NotFound, UsageError
from handoff.loop import fences, filer
from handoff.loop.monitor import Timing
from handoff.machinery import limits, proc, reaper, sandbox
from handoff.machinery import tmux as tmux_mod
from handoff.machinery.checkout_setup import SetupFence
from handoff.machinery.groups import end_lock_holder
from handoff.machinery.peers import Peers, allowlisted_env, self_argv
from handoff.machinery.ports import PortBook
from handoff.machinery.repo import Repo
from handoff.machinery.sandbox import Support
from handoff.machinery.ticket_branch import branch_name
from handoff.machinery.tmux import Tmux
from handoff.machinery.worktrees import GATE, MadeFields, TicketWorktrees
from handoff.phases import Phase
from handoff.protocol import contracts
from handoff.protocol import plan as plan_mod
from handoff.protocol.briefs import BriefContext
from handoff.providers import REGISTRY, Launch, Provider, RoleSpec, clistate, get
from handoff.providers import sessions as session_files
from handoff.record import peerfiles, slots
from handoff.record.grants import Grants
from handoff.record.store import keep_private, private_dir
from handoff.record.ticket import State, TicketDir, brief_round
from handoff.role import IMPLEMENTER

#: where a fenced set-up's package managers keep their caches: its private /tmp, gone with it
SETUP_CACHES = {"XDG_CACHE_HOME": "/tmp/cache", "npm_config_cache": "/tmp/cache/npm",
                "PIP_CACHE_DIR": "/tmp/cache/pip", "YARN_CACHE_FOLDER": "/tmp/cache/yarn"}


@dataclass(frozen=True)
class Workspace:
    home: Path
    tdir: TicketDir
    repo: Repo
    config: Config
    #: the repository was deleted: `repo` is only its remembered path, no git call works on
    #: it, and its worktrees (and the ticket branch) went with it
    repo_gone: bool = False

    @classmethod
    def open(cls, home: Path, tdir: TicketDir, state: State | None = None,
             repo_may_be_gone: bool = False) -> Workspace:
        """The ticket's workspace, from its directory. state: when the caller recovered it
        (state.json unreadable). repo_may_be_gone: for the commands that must work from the
        ticket directory alone (stop, close); elsewhere a missing repo is a clear error."""
        keep_private()
        if tdir.path.is_dir():  # a ticket made by an older handoff may be open to others
            private_dir(tdir.path)
        state = state or tdir.load()
        try:
            if not state.repo:
                raise NotFound(f"the record of {tdir.ticket} names no repository")
            repo = Repo.at(Path(state.repo))
        except (NotFound, UsageError) as exc:
            if not repo_may_be_gone:
                raise NotFound(f"the repository of {tdir.ticket} is gone: {exc.message}",
                               f"'handoff stop {tdir.ticket}' and 'handoff close {tdir.ticket}' "
                               f"still work from its record in {tdir.path}") from None
            top = Path(state.repo or tdir.path)
            return cls(home=home, tdir=tdir, repo=Repo(top=top, common_dir=top / ".git"),
                       config=config_mod.load(home, None), repo_gone=True)
        from handoff.loop import failover

        return cls(home=home, tdir=tdir, repo=repo,
                   config=failover.applied(config_mod.load(home, repo.top), state.failovers))

    def state(self) -> State:
        return self.tdir.load()

    @property
    def worktrees(self) -> TicketWorktrees:
        return TicketWorktrees(self.repo, self.tdir.ticket, self.config.share,
                               self.config.post_create, self.config.setup_timeout, self.home,
                               self.port_env, self.setup_fence())

    def setup_fence(self) -> SetupFence | None:
        """What runs a checkout's post_create in the sandbox when the peers run in one, and
        within the limits the gate has: the commands run code of the commit the checkout is
        at (a package's install scripts), so never as the person, and never unbounded. Its
        caches go to its private /tmp (no cache is shared between checkouts or with the
        person's own tools)."""
        if not self.config.post_create:
            return None
        found = self.sandbox()
        caps = limits.bounds(self.config.sandbox.limits)
        if found is None and caps is None:
            return None

        @contextlib.contextmanager
        def fence(worktree: Path, argv: Sequence[str]) -> Iterator[list[str]]:
            command = ["env", *(f"{k}={v}" for k, v in SETUP_CACHES.items()), *argv] \
                if found is not None else list(argv)
            if found is not None:
                walls = fences.setup(home=self.home, repo=self.repo, worktrees=TicketWorktrees(
                    self.repo, self.tdir.ticket, self.config.share), config=self.config,
                    env=os.environ, worktree=worktree)
                command = sandbox.wrap(found.bwrap, walls, command, tmp=self.tmp_cap(found))
            bounded = caps.make(self.home, reaper.marker(self.tdir.path, worktree.name),
                                f"{self.tdir.ticket}.{worktree.name}.setup") \
                if caps is not None else None
            try:
                yield [*(bounded.argv() if bounded is not None else []), *command]
            finally:
                if bounded is not None:
                    bounded.end()
        return fence

    def ports(self, name: str) -> list[int]:
        """The TCP ports of the ticket's worktree name (a role's, or the gate's), booked for
        it in the machine's port book the first time they are asked for."""
        if not self.config.ports:
            return []
        low, high = self.config.port_range
        return PortBook(self.home).take(f"{self.tdir.path}#{name}", self.config.ports, low, high,
                                        alive=booked_ticket_alive)

    def port_env(self, name: str) -> dict[str, str]:
        """HANDOFF_PORT_1..N of the worktree, and PORT for the first: for its peer, its gate,
        its set-up."""
        found = self.ports(name)
        env = {f"HANDOFF_PORT_{i}": str(port) for i, port in enumerate(found, start=1)}
        return {**env, "PORT": str(found[0])} if found else env

    def peers(self, state: State) -> Peers:
        return Peers(Tmux(state.socket, self.home), state.session, self.tdir.path,
                     self.config.peer_nice)

    def plan(self) -> plan_mod.Plan:
        """The approved plan; its gate the repository's `test:` when it names none itself."""
        plan = plan_mod.parse(self.tdir.plan_md.read_text(encoding="utf-8"), str(self.tdir.plan_md))
        return replace(plan, test=self.config.test) if plan.test is None and self.config.test \
            else plan

    def timing(self) -> Timing:
        return Timing(start=self.config.start_timeout, stall=self.config.stall_timeout,
                      grace=self.config.turn_grace, patience=self.config.api_patience,
                      unrecognised=self.config.unrecognised_timeout,
                      files=tuple((key, str(self.config_file(key)))
                                  for key in ("start_timeout", "stall_timeout")))

    def config_file(self, key: str) -> Path:
        """Where a fix tells the person to change key: the file that sets it now."""
        return config_mod.set_in(self.home, self.repo.top, key)

    def spec(self, role: str) -> RoleSpec:
        """What the config says of one of the ticket's roles; a clear error when a config
        changed since the ticket was made no longer names it."""
        spec = self.config.spec(role)
        if spec is None:
            raise UsageError(f"{self.tdir.ticket} has a role {role!r} that the configuration "
                             "no longer names", f"put roles.{role} back into .handoff.yaml to "
                             f"carry the ticket on, or 'handoff close {self.tdir.ticket}'")
        return spec

    def provider(self, role: str) -> Provider:
        """The role's CLI, bound to its own state folder in this ticket (what its environment
        points the CLI at, what the fence lets it write, where its session logs are read)."""
        return get(self.spec(role), self.tdir.cli(role))

    def env(self, role: str) -> dict[str, str]:
        """A peer's allowlisted environment: base variables, its provider's, the config's, and
        its CLI's own state folder (in place of the person's, whatever they allowed)."""
        provider = self.provider(role)
        extra = {"HANDOFF_HOME": str(self.home), "HANDOFF_TICKET": self.tdir.ticket,
                 "HANDOFF_TICKET_DIR": str(self.tdir.path), "HANDOFF_ROLE": role,
                 # bytecode outside the checkout: a detached checkout's ignored files stay
                 # between rounds, a stale .pyc must not be among them (TicketWorktrees.point)
                 **self.worktrees.bytecode_env(role), **self.port_env(role),
                 **provider.state_env()}
        return allowlisted_env(extra, (*provider.passthrough(dict(os.environ)),
                                       *self.config.env_allow))

    def gate_env(self) -> dict[str, str]:
        """The gate's environment (its test command and scanners): the base variables and the
        config's, no provider's key: the project's tests have no use for one."""
        return allowlisted_env({"HANDOFF_HOME": str(self.home), "HANDOFF_TICKET": self.tdir.ticket,
                                **self.worktrees.bytecode_env(GATE), **self.port_env(GATE)},
                               self.config.env_allow)

    def orchestrator_env(self) -> dict[str, str]:
        """The orchestrator passes its peers' variables on to them, so it is given those (and
        no provider's its roles do not run: a Codex ticket's orchestrator holds no Anthropic
        key)."""
        allow = [n for role in self.config.roles
                 for n in self.provider(role).passthrough(dict(os.environ))]
        extra = {"HANDOFF_HOME": str(self.home)}
        names = (*allow, *self.config.env_allow, "VIRTUAL_ENV", proc.TIMEOUT_VARIABLE,
                 tmux_mod.TIMEOUT_VARIABLE, trace.ENV, "HANDOFF_WARM")
        return allowlisted_env(extra, names)

    def contract(self, state: State, role: str) -> Path:
        """The role's contract, written into the ticket directory."""
        spec = self.spec(role)
        return contracts.write(self.tdir.path, self.repo.top, role, state.roles.kind(role),
                               spec.focus, spec.contract)

    def brief_context(self, state: State, role: str, round_: int) -> BriefContext:
        provider = self.provider(role)
        contract = self.contract(state, role)
        return BriefContext(
            contract=contract, contract_inline=not provider.takes_contract,
            ticket=state.ticket, role=role, kind=state.roles.kind(role), round=round_,
            ticket_text=self.tdir.ticket_md.read_text(encoding="utf-8"),
            # a planner's ticket has none before its plan is drafted
            plan=self.plan() if self.tdir.plan_md.exists() else plan_mod.Plan(text=""),
            plan_path=self.tdir.plan_md, worktree=self.worktrees.path(role),
            submit=tuple(self_argv("submit", "--dir", str(self.tdir.path), "--role", role,
                                   "--round", str(round_))),
            draft=self.tdir.drafts(role) / f"{role}-{round_}.md",
        )

    def ensure_worktree(self, state: State, role: str) -> MadeFields | None:
        """Before a peer starts: its folder is a live worktree, made again from the branch (or
        the commit under review) when it was deleted by hand; the `worktree` event's fields when
        anything had to be done."""
        rev = state.base_commit if role == IMPLEMENTER else state.last_commit()
        made = self.worktrees.ensure(role, rev, recreate=True)
        return made.fields() if made.changed else None

    def launch(self, state: State, role: str, brief: Path | None) -> Launch:
        """Start the role fresh on brief (None: warm, with no prompt, for a brief pasted
        later); the old process's screen is kept as a transcript."""
        peers = self.peers(state)
        if peers.pane(role) is not None:
            transcript = self.transcript_for(state, role)
            peers.capture(role, transcript)
            self.keep_session(state, role, transcript)
        launch = self.launch_of(state, role, brief)
        self.seed_cli(state, role)
        env = self.env(role)
        found = self.sandbox()
        fence = None
        if found is not None:
            walls = fences.peer(role, state.roles.kind(role), self.provider(role), env,
                                home=self.home, tdir=self.tdir, repo=self.repo,
                                worktrees=self.worktrees, config=self.config)

            def fence(argv: list[str]) -> list[str]:
                return sandbox.wrap(found.bwrap, walls, argv, tmp=self.tmp_cap(found))
        caps = limits.bounds(self.config.sandbox.limits)
        made = caps.make(self.home, reaper.marker(self.tdir.path, role),
                         f"{self.tdir.ticket}.{role}") if caps is not None else None
        # the peer holds the ticket's place among the tickets at work while it lives: a killed
        # orchestrator's slot is not taken by another ticket while its peers work on
        hold = slots.peer_hold(self.home, self.tdir.path, state.created, self.config.parallel,
                               role)
        peers.launch(self.provider(role), launch, env, fence,
                     made.plan if made is not None else None, hold)
        # the fresh process alone may file this round's report (handoff.loop.filer); the
        # orchestrator hears no report before this returns
        round_ = brief_round(brief) if brief is not None else None
        pane = peers.pane(role)
        if round_ is not None and pane is not None:
            Grants(self.tdir.path).grant(role, round_, filer.identity(pane.pid))
        return launch

    def seed_cli(self, state: State, role: str) -> clistate.Seeded | None:
        """The role's CLI state folder made ready for its launch: pruned to its session logs,
        seeded afresh from the person's configuration and login (handoff.providers.clistate).
        Whatever ran of its last launch is ended first: nothing of it may write the folder
        again once it is seeded (peers.launch would end it only after)."""
        provider = self.provider(role)
        if not provider.state_env():
            return None
        self.peers(state).reap(role)
        return clistate.seed(provider, os.environ, self.worktrees.path(role))

    def forget_logins(self) -> list[Path]:
        """Remove the copies of the person's logins from every role's CLI folder: a closed
        ticket keeps its record, not a second copy of their credentials."""
        try:
            roles = [p.name for p in self.tdir.path.joinpath("cli").iterdir()
                     if p.is_dir() and not p.is_symlink()]
        except OSError:
            return []
        return [gone for role in roles for cls in REGISTRY.values()
                for gone in clistate.forget_logins(cls(state=self.tdir.cli(role)))]

    def sandbox(self) -> sandbox.Support | None:
        """bubblewrap, when this ticket's peers and gate run fenced in; None when they run as
        the person does (`sandbox: off`, or `auto` where bubblewrap cannot work). UsageError
        for `sandbox: on` where it cannot."""
        mode = self.config.sandbox.mode
        found = sandbox.in_force(mode)
        if found is None and mode == "on":
            why = sandbox.support()
            raise UsageError(f"sandbox: on, but {why.why}", why.fix)
        return found

    def gate_fence(self) -> limits.Fenced | None:
        """What runs the gate in the sandbox, when the peers run in one, and within its
        limits (sandbox.limits: each run its own cgroups, handoff.loop.gate.run_gate)."""
        found = self.sandbox()
        caps = limits.bounds(self.config.sandbox.limits)
        wrap = None
        if found is not None:
            walls = fences.gate(home=self.home, repo=self.repo, worktrees=self.worktrees,
                                config=self.config, env=self.gate_env())

            def wrap(argv: Sequence[str]) -> list[str]:
                return sandbox.wrap(found.bwrap, walls, argv, tmp=self.tmp_cap(found))
        if wrap is None and caps is None:
            return None
        return limits.Fenced(wrap, caps, self.home, reaper.marker(self.tdir.path, GATE),
                             f"{self.tdir.ticket}.{GATE}")

    def tmp_cap(self, found: Support) -> int | None:
        """The size of the fence's own folders (/tmp, TMPDIR), where bubblewrap can cap it."""
        return self.config.sandbox.limits.tmp if found.sized else None

    def transcript_for(self, state: State, role: str) -> Path:
        """Where the role's pane history is kept: named after the round its process worked on
        (the brief its pane was tagged with), not the round in which it is retired."""
        peers = self.peers(state)
        pane = peers.pane(role)
        worked_on = pane.mark if pane is not None else ""
        return self.tdir.transcript(role, brief_round(worked_on) or state.round)

    def keep_session(self, state: State, role: str, transcript: Path) -> Path | None:
        """Copy the CLI's own log of the role's live session next to its pane transcript; None
        when there is none to copy. The log lies in the CLI's state folder, which the peer
        writes, and the copy lands where the peer reads: so it is copied only from beneath one
        of the provider's state folders, through no link (the log made a link to a key is
        not copied), a regular file of at most the size a session file is read to."""
        provider = self.provider(role)
        log = provider.session_log(self.worktrees.path(role), self.peers(state).session_of(role),
                                   os.environ)
        if log is None:
            return None
        root = next((folder for folder in provider.state_dirs(os.environ)
                     if log.is_relative_to(folder)), None)
        if root is None:
            return None
        kept = transcript.with_name(f"{transcript.stem}.session.jsonl")
        try:
            peerfiles.copy_out(root, log, kept, session_files.FILE_LIMIT)
        except peerfiles.Refused:
            return None
        return kept

    def launch_of(self, state: State, role: str, brief: Path | None) -> Launch:
        provider = self.provider(role)
        contract = self.contract(state, role) if provider.takes_contract else None
        return Launch(ticket=self.tdir.ticket, role=role, worktree=self.worktrees.path(role),
                      brief=brief, ticket_dir=self.tdir.path, contract=contract,
                      session_id=str(uuid.uuid4()),
                      signals=self.tdir.signals(role) if provider.signals else None,
                      sandboxed=self.sandbox() is not None)

    def latest_brief(self, role: str) -> Path | None:
        briefs = self.tdir.briefs(role)
        return briefs[-1] if briefs else None

    def branch(self) -> str:
        return branch_name(self.tdir.ticket)

    def stop_orchestrator(self, timeout: float = 15.0) -> int | None:
        """SIGTERM the live orchestrator of this ticket (found by its lock) and wait for it."""
        return end_lock_holder(self.tdir.lock_file, f"the lock of {self.tdir.ticket}", timeout)


def booked_ticket_alive(owner: str) -> bool:
    """A port booking (`<ticket dir>#<worktree>`) whose ticket may still use it: its record is
    there and not closed (a record that cannot be read keeps its ports: never take a live one)."""
    tdir = TicketDir(Path(owner.rsplit("#", 1)[0]))
    if not tdir.state_file.exists():
        return False
    try:
        return tdir.load().phase != Phase.CLOSED
    except (UsageError, NotFound):
        return True
