"""handoff.machinery.limit_mechanism: how this machine holds the limits: cgroup v2 divided from
our cgroup's parent, cgroup v1 per writable controller, rlimits for the rest, and what each
says for a person (`handoff doctor`)."""

from __future__ import annotations

from handoff import config as config_mod
from handoff.operations import doctor
from tests.cgroup_runs import cgroups_here


def test_this_machine_holds_both_limits_in_cgroups_and_doctor_says_so() -> None:
    held = cgroups_here()
    assert held.said() == "cgroup v1 (pids, memory)" and held.weaker() == ""
    check = doctor.limits_check(config_mod.Config())
    assert check.level == "OK" and check.detail.startswith("cgroup v1 (pids, memory): 1024 "
                                                           "processes, 8 GiB of memory")
