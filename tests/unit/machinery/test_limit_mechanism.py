"""handoff.machinery.limit_mechanism: how this machine holds the limits: cgroup v2 divided from
our cgroup's parent, cgroup v1 per writable controller, rlimits for the rest, and what each
says for a person (`handoff doctor`)."""

from __future__ import annotations

from pathlib import Path

from handoff.machinery.limit_mechanism import (
    MEMORY,
    PIDS,
    Hierarchy,
    Mechanism,
    decide,
    mounts_of,
)
from tests.cgroup_runs import MIB


def test_the_mechanism_said_where_cgroups_are_missing() -> None:
    none = Mechanism((), root=True, why="cgroup v1 pids at / is not writable")
    assert none.said() == "rlimits only: processes by RLIMIT_NPROC, memory by RLIMIT_DATA"
    assert "does not bind: handoff runs as root" in none.weaker()
    assert "per process (RLIMIT_DATA: an allocation past it fails)" in none.weaker()
    assert none.weaker().endswith("no cgroup: cgroup v1 pids at / is not writable")
    user = Mechanism((), root=False)
    assert "counts all your processes" in user.weaker()
    elsewhere = Mechanism((), root=False, why="no cgroups on darwin", rlimits=False)
    assert elsewhere.said() == "none: no cgroups on darwin"
    assert elsewhere.weaker() == "nothing bounds a peer's processes or memory here"


def test_cgroup_v2_is_divided_from_our_cgroup_s_parent(tmp_path: Path) -> None:
    """The v2 choice, on a folder laid out as the kernel's cgroup2 files are (this machine's
    v2 hierarchy holds no pids or memory controller to try it on): handoff's folder goes into
    the parent of our cgroup, which holds us and so cannot pass controllers on."""
    mount = tmp_path / "unified"
    parent = mount / "user.slice"
    own = parent / "session-1.scope"
    own.mkdir(parents=True)
    (parent / "cgroup.controllers").write_text("cpu io memory pids\n")
    (parent / "cgroup.subtree_control").write_text("memory pids\n")
    # what the kernel shows in a new child once its parent passes the controllers on
    (parent / "handoff").mkdir()
    for name in ("cgroup.subtree_control", "pids.max", "memory.max"):
        (parent / "handoff" / name).write_text("")
    mounts = f"35 25 0:30 / {mount} rw,relatime shared:9 - cgroup2 cgroup2 rw\n"
    held = decide("0::/user.slice/session-1.scope\n", mounts, root=False)
    assert held.hierarchies == (Hierarchy(2, (PIDS, MEMORY), parent / "handoff"),)
    assert held.said() == "cgroup v2 (pids, memory)" and held.weaker() == ""
    assert (parent / "handoff" / "cgroup.subtree_control").read_text() == "+pids +memory"
    assert held.hierarchies[0].settings(100, 5 * MIB) == [
        ["pids.max", "100", True], ["memory.max", str(5 * MIB), True],
        ["memory.swap.max", "0", False]]
    # a parent that passes nothing on: rlimits, and why
    (parent / "cgroup.controllers").write_text("cpu io\n")
    fallback = decide("0::/user.slice/session-1.scope\n", mounts, root=False)
    assert fallback.hierarchies == () and "no pids or memory controller" in fallback.why



def test_cgroup_v1_is_taken_per_controller_where_it_is_writable(tmp_path: Path) -> None:
    """The v1 choice, on folders laid out as the kernel's v1 hierarchies are: pids where
    handoff's folder has the controller's files, memory not (rlimits stand in, and say why);
    a mount point with a space, as mountinfo escapes it."""
    pids, memory = tmp_path / "pids mount", tmp_path / "memory"
    base = pids / "user.slice" / "handoff"
    base.mkdir(parents=True)
    for name in ("pids.max", "cgroup.procs"):  # what the kernel shows in a new cgroup
        (base / name).write_text("")
    (memory / "user.slice").mkdir(parents=True)
    mounts = (f"40 25 0:35 / {tmp_path}/pids\\040mount rw,nosuid shared:15 - cgroup cgroup "
              "rw,pids\n"
              f"41 25 0:36 / {memory} rw,nosuid shared:16 - cgroup cgroup rw,memory\n")
    assert [m[1] for m in mounts_of(mounts, "cgroup")] == [str(pids), str(memory)]
    held = decide("12:pids:/user.slice\n11:memory:/user.slice\n", mounts, root=True)
    assert held.hierarchies == (Hierarchy(1, (PIDS,), base),)
    assert held.said() == "cgroup v1 (pids); rlimits only: memory by RLIMIT_DATA"
    assert f"cgroup v1 memory at {memory / 'user.slice'} is not writable" in held.why
    assert held.hierarchies[0].settings(100, 5 * MIB) == [["pids.max", "100", True]]
