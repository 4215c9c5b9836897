"""handoff.operations.gc.cgroups: the cgroups handoff recorded for closed or vanished tickets'
peers and gates go once empty; a busy one is named and kept, a live ticket's is not looked at.

Folders stand in for the cgroups here (the kernel's own, with processes in them, are proven by
tests/integration/machinery/test_limits.py::test_gc_removes_a_gone_ticket_s_empty_cgroups_and_names_a_busy_one):
what is read is the same, cgroup.procs, and an rmdir that fails on a folder that is not empty."""

from __future__ import annotations

import json
import os
from pathlib import Path

from handoff.machinery.limits import RECORDS
from handoff.operations.gc.cgroups import cgroup_leftovers
from handoff.operations.gc.found import Options
from handoff.phases import Phase
from tests.unit.operations.gc.test_found import saved


def recorded(home: Path, name: str, owner: str, *dirs: Path) -> Path:
    """A cgroup record as handoff.machinery.limits writes it for a launch."""
    path = home / RECORDS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"owner": owner, "dirs": [str(d) for d in dirs]}))
    return path


def test_a_closed_tickets_empty_cgroups_go_with_their_record(handoff_home: Path,
                                                              tmp_path: Path) -> None:
    record = saved(handoff_home, "T-1", phase=Phase.CLOSED)
    pids, memory = tmp_path / "pids" / "h-1", tmp_path / "memory" / "h-1"
    pids.mkdir(parents=True)
    memory.mkdir(parents=True)
    file = recorded(handoff_home, "h-1", f"{record.tdir.path}#implementer", pids, memory)
    [named] = cgroup_leftovers(handoff_home, [record], Options(dry_run=True))
    assert (named.kind, named.path, named.removable, named.removed) == \
        ("cgroup", f"{pids}, {memory}", True, False)
    assert named.why == "the implementer of T-1, whose ticket is closed or gone, empty"
    assert pids.is_dir() and file.exists()
    [removed] = cgroup_leftovers(handoff_home, [record], Options())
    assert removed.removed and not pids.exists() and not memory.exists() and not file.exists()


def test_a_live_tickets_cgroups_are_not_looked_at(handoff_home: Path, tmp_path: Path) -> None:
    live = saved(handoff_home, "T-2")
    folder = tmp_path / "pids" / "h-2"
    folder.mkdir(parents=True)
    recorded(handoff_home, "h-2", f"{live.tdir.path}#gate", folder)
    assert cgroup_leftovers(handoff_home, [live], Options()) == []
    assert folder.is_dir()
    [gone] = cgroup_leftovers(handoff_home, [], Options())  # its record gone: vanished
    assert gone.removed and not folder.exists()


def test_a_cgroup_processes_still_run_in_is_kept(handoff_home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "pids" / "h-3"
    folder.mkdir(parents=True)
    (folder / "cgroup.procs").write_text(f"{os.getpid()}\n")
    file = recorded(handoff_home, "h-3", f"{handoff_home}/repo-0123456789/T-3#reviewer", folder)
    [kept] = cgroup_leftovers(handoff_home, [], Options())
    assert not kept.removable and not kept.removed
    assert f"processes still run in it (1 in {folder}): kept" in kept.why
    assert folder.is_dir() and file.exists()


def test_one_the_kernel_keeps_is_named_and_its_record_stays(handoff_home: Path,
                                                           tmp_path: Path) -> None:
    folder = tmp_path / "pids" / "h-4"
    folder.mkdir(parents=True)
    (folder / "child").mkdir()  # a cgroup below it: rmdir fails
    file = recorded(handoff_home, "h-4", "", folder)
    [kept] = cgroup_leftovers(handoff_home, [], Options())
    assert not kept.removable and not kept.removed
    assert kept.why == "a cgroup of handoff's whose record names no owner, empty; the kernel " \
        "kept it: named"
    assert file.exists()
