"""handoff.machinery.limits on real cgroups (this machine, as CI's: root, cgroup v1 pids and
memory writable): each run's cgroups made and recorded, what a dead peer's say of its end, what
is left of them afterwards (swept, gc); the rlimits that stand in for a missing cgroup; a gate
run within its limits; and the config keys that set them."""

from __future__ import annotations

from pathlib import Path

import pytest

from handoff import config as config_mod
from handoff.config import Limits
from handoff.errors import UsageError
from handoff.machinery.limit_mechanism import Mechanism
from handoff.machinery.limits import Bounds
from tests.cgroup_runs import MIB


def test_no_rlimit_stands_in_where_proc_cannot_count_a_users_tasks(tmp_path: Path) -> None:
    elsewhere = Mechanism((), root=False, why="no cgroups on darwin", rlimits=False)
    made = Bounds(64, 64 * MIB, elsewhere).make(tmp_path, "/t/T#x", "T.x")
    assert made.plan == {"cgroups": []} and made.dirs == ()
    assert Bounds(64, 64 * MIB, Mechanism((), root=False)).make(
        tmp_path, "/t/T#x", "T.x").plan == {"cgroups": [], "nproc": 64, "data": 64 * MIB}


@pytest.mark.parametrize(("given", "expected"), [
    ({"processes": 200, "memory": "512M", "tmp": "1.5GiB"},
     Limits(200, 512 * MIB, 1536 * MIB)),
    ({"memory": 1 << 30, "tmp": "64 MiB"}, Limits(1024, 1 << 30, 64 * MIB)),
    ({"processes": "none", "memory": None}, Limits(None, None, 1 << 30)),
])
def test_sandbox_limits_in_the_person_s_config(tmp_path: Path, given: dict[str, object],
                                                expected: Limits) -> None:
    home = tmp_path / "hh"
    home.mkdir()
    (home / "config.yaml").write_text(
        "sandbox:\n  limits:\n" + "".join(f"    {k}: {v if v is not None else 'null'}\n"
                                          for k, v in given.items()))
    assert config_mod.load(home, None).sandbox.limits == expected


@pytest.mark.parametrize(("text", "said"), [
    ("limits: {memory: lots}", "sandbox.limits.memory must be a size"),
    ("limits: {processes: 4}", "sandbox.limits.processes must be at least 32 processes"),
    ("limits: {processes: 1.5}", "sandbox.limits.processes must be a whole number"),
    ("limits: {tmp: 10}", "sandbox.limits.tmp must be at least 1 MiB"),
    ("limits: {swap: 1G}", "sandbox.limits: unknown key(s) ['swap']"),
    ("limits: 1G", "'sandbox.limits' must be a mapping"),
])
def test_a_bad_limit_is_named_with_its_file_and_key(tmp_path: Path, text: str,
                                                     said: str) -> None:
    home = tmp_path / "hh"
    home.mkdir()
    (home / "config.yaml").write_text(f"sandbox: {{{text}}}\n")
    with pytest.raises(UsageError) as raised:
        config_mod.load(home, None)
    assert str(home / "config.yaml") in raised.value.message
    assert said in raised.value.message and raised.value.hint


def test_a_repository_may_lower_limits_never_raise_them(tmp_path: Path) -> None:
    home, repo = tmp_path / "hh", tmp_path / "repo"
    home.mkdir()
    repo.mkdir()
    (home / "config.yaml").write_text("sandbox: {limits: {memory: 4G}}\n")
    (repo / ".handoff.yaml").write_text("sandbox: {limits: {memory: 2G, processes: 300}}\n")
    assert config_mod.load(home, repo).sandbox.limits == Limits(300, 2 << 30, 1 << 30)
    for looser in ("memory: 6G", "processes: none", "tmp: 2G"):
        (repo / ".handoff.yaml").write_text(f"sandbox: {{limits: {{{looser}}}}}\n")
        with pytest.raises(UsageError, match="never loosen them") as raised:
            config_mod.load(home, repo)
        assert "$HANDOFF_HOME/config.yaml" in raised.value.hint
