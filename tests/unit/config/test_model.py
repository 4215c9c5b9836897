"""handoff.config.model: what an empty configuration is, a host looked up by name, sizes as a
person reads them, and the sandbox's paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from handoff.config import HOSTS_HINT, Config, Host, Sandbox, show_size
from handoff.config.model import GIB
from handoff.errors import UsageError
from handoff.record.slots import default_limit


def test_an_empty_configuration_is_the_two_roles_with_the_machines_own_parallel() -> None:
    config = Config()
    assert config.team.names == ("implementer", "reviewer")
    assert config.providers == {"implementer": "scripted", "reviewer": "scripted"}
    assert config.parallel == default_limit() >= 1
    assert Config(max_parallel=3).parallel == 3
    assert Config().roles is not config.roles, "each Config its own roles"


def test_a_host_is_found_by_name_else_the_hosts_there_are_are_named() -> None:
    build = Host("build1", ("ssh", "me@build1"))
    assert Config(hosts={"build1": build}).host("build1") == build
    with pytest.raises(UsageError) as caught:
        Config(hosts={"build1": build}).host("gpu")
    assert caught.value.message == "no host 'gpu' in $HANDOFF_HOME/config.yaml"
    assert caught.value.hint == "hosts: build1"
    with pytest.raises(UsageError) as caught:
        Config().host("gpu")
    assert caught.value.hint == HOSTS_HINT


@pytest.mark.parametrize(("size", "shown"), [
    (None, "no limit"), (8 * GIB, "8 GiB"), (512 << 20, "512 MiB"), (1536 << 10, "1536 KiB"),
    (1 << 40, "1 TiB"), (1000, "1000 bytes"), (GIB + 1, f"{GIB + 1} bytes"),
])
def test_a_size_is_shown_in_the_largest_binary_unit_it_is_whole_in(size: int | None,
                                                                   shown: str) -> None:
    assert show_size(size) == shown


def test_a_sandboxs_paths_are_its_write_or_its_hide_with_home_expanded() -> None:
    box = Sandbox(write=("~/.cache/pip", "/opt/cache"), hide=("~/secrets",))
    assert box.paths("write") == [Path.home() / ".cache" / "pip", Path("/opt/cache")]
    assert box.paths("hide") == [Path.home() / "secrets"]
