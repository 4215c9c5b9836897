"""A passed ticket's evidence bundle: what decided it, in one file anyone can check again
(`handoff verify`, handoff.operations.verifying).

The bundle is a tar (`evidence-<commit>.tar` in the ticket's folder) of flat, named members:
the plan, the change (`git diff --binary base...commit`), the gate's and scanners' logs of the
last round, each reviewer's report of it with its receipt, the final report, and
`manifest.json`: what the ticket was (repository, base, commit, branch, the gate's command and
result, the verdicts, the ledger, the weakened tests, the sandbox, the usage) and the sha256 of
every other member. `manifest.sig` is the manifest's Ed25519 signature by this home's key
(handoff.record.signing); `signer.pub` the public key it claims.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

from handoff.build import version
from handoff.loop.workspace import Workspace
from handoff.record import signing
from handoff.record.events import now
from handoff.record.store import atomic_write_bytes
from handoff.record.ticket import State

FORMAT = "handoff-evidence/1"
MANIFEST, SIGNATURE, SIGNER = "manifest.json", "manifest.sig", "signer.pub"
CHANGE = "change.diff"


def bundle_path(ws: Workspace, commit: str) -> Path:
    return ws.tdir.path / f"evidence-{commit[:12]}.tar"


def members(ws: Workspace, state: State, n: int) -> dict[str, bytes]:
    """What the bundle holds besides its manifest, by member name."""
    tdir = ws.tdir
    commit = state.commit_of(n)
    found: dict[str, bytes] = {"plan.md": tdir.plan_md.read_bytes(),
                               CHANGE: ws.repo.diff(state.base_commit, commit).encode()}
    paths = [tdir.gate_log(n), *(tdir.scan_log(n, name) for name in state.scans.get(str(n), {})),
             tdir.final_report]
    for role in state.reviewed.get(str(n), {}):
        report = tdir.report(role, n)
        paths += [report, tdir.receipt(report)]
    for path in paths:
        # handoff's own files, written by the orchestrator; a link is never followed
        if path.is_file() and not path.is_symlink():
            found[path.name] = path.read_bytes()
    return found


def manifest(ws: Workspace, state: State, n: int, files: dict[str, bytes]) -> dict[str, object]:
    commit = state.commit_of(n)
    plan = ws.plan()
    fenced = ws.sandbox()
    usage = [{k: v for k, v in e.items() if k != "time"}
             for e in ws.tdir.events.read()[0] if e.get("kind") == "usage"]
    return {
        "format": FORMAT, "handoff": version(), "made": now(), "ticket": state.ticket,
        "repo_key": state.repo_key, "base": state.base, "base_commit": state.base_commit,
        "commit": commit, "branch": state.branch, "outcome": str(state.phase),
        "round": n, "reviews": state.reviews, "source": state.source,
        "gate": {"command": list(plan.test) if plan.test else None,
                 "result": state.gates.get(str(n), "")},
        "scanners": state.scans.get(str(n), {}),
        "verdicts": state.reviewed.get(str(n), {}),
        "ledger": state.ledger, "weakened": state.weakened.get(str(n), []),
        "unrequested": state.unrequested.get(str(n), []),
        "proof": state.proofs.get(str(n), {}),
        "sandbox": fenced.why if fenced is not None else "none",
        "usage": usage,
        "files": {name: hashlib.sha256(data).hexdigest() for name, data in sorted(files.items())},
    }


def write(ws: Workspace, state: State) -> tuple[Path, str]:
    """The bundle of a passed ticket, written whole or not at all: its path and the
    fingerprint of the key that signed it."""
    n = max((int(r) for r in state.commits), default=state.round)
    files = members(ws, state, n)
    head = json.dumps(manifest(ws, state, n, files), indent=1, sort_keys=True).encode()
    signature, key = signing.sign(ws.home, head)
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in [(MANIFEST, head), (SIGNATURE, signature),
                           (SIGNER, key.text.encode() + b"\n"), *sorted(files.items())]:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    path = bundle_path(ws, state.commit_of(n))
    atomic_write_bytes(path, out.getvalue())
    return path, key.fingerprint
