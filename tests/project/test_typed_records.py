"""The data handoff knows the shape of has a type (issue 35): `dict[str, Any]` stays for what is
truly open (keyword arguments assembled for a constructor), and its count cannot creep back; and
the typed status row is the row `status --json` prints and docs/cli.md documents, key for key
and in order (its JSON is the dict itself)."""

from __future__ import annotations

import re
from pathlib import Path

from handoff.operations import standing
from handoff.operations.standing import StatusRow
from tests.loop_tickets import new_ticket
from tests.paths import ROOT
from tests.project.test_cli_conventions import documented_keys

#: the uses of `dict[str, Any]` left in handoff/ (128 before the records were typed): lower it
#: when one goes; a new one wants a type (a dataclass, a TypedDict, Mapping[str, object])
CEILING = 8
#: the keys a host's row has besides (handoff.operations.hosts)
HOST_KEYS = ("host", "local_repo")


def uses_of_any_dicts(root: Path) -> list[str]:
    """file:line of every `dict[str, Any]` in root/handoff."""
    return [f"{path.relative_to(root)}:{number}"
            for path in sorted((root / "handoff").rglob("*.py"))
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            for _ in re.finditer(r"dict\[str, Any\]", line)]


def test_dict_of_any_stays_under_its_ceiling() -> None:
    found = uses_of_any_dicts(ROOT)
    assert len(found) <= CEILING, (
        f"{len(found)} uses of dict[str, Any] in handoff/, at most {CEILING}: give the data a "
        "type (a frozen dataclass, a TypedDict for JSON with known keys, or Mapping[str, object] "
        "narrowed where it is read)\n" + "\n".join(found))


def test_the_count_sees_every_use_on_a_line(tmp_path: Path) -> None:
    module = tmp_path / "handoff" / "m.py"
    module.parent.mkdir()
    module.write_text("a: dict[str, Any] = {}\nb: dict[str, object] = {}\n"
                      "def f(x: dict[str, Any]) -> dict[str, Any]: ...\n", encoding="utf-8")
    assert uses_of_any_dicts(tmp_path) == ["handoff/m.py:1", "handoff/m.py:3", "handoff/m.py:3"]


def test_the_status_row_type_is_the_documented_json_in_its_order() -> None:
    typed = [key for key in StatusRow.__annotations__ if key not in HOST_KEYS]
    assert typed == list(documented_keys("status"))
    assert list(StatusRow.__annotations__)[-2:] == list(HOST_KEYS), \
        "a host's row is its host's own, then these"


def test_a_tickets_status_row_has_the_types_keys_in_their_order(
        repo: Path, handoff_home: Path) -> None:
    new_ticket(repo, handoff_home, ticket="TR-1")
    [row] = standing.status(handoff_home)
    assert list(row) == [key for key in StatusRow.__annotations__ if key not in HOST_KEYS]
    assert (row["ticket"], row["phase"], row["round"], row["run"]) == \
        ("TR-1", "implementing", 1, "not started")
    assert row["queue"] is None and row["usage"] is None and row["orchestrator"] is None
