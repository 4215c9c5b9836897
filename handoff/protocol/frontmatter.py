"""Markdown with a YAML frontmatter block: machine fields above, human text below."""

from __future__ import annotations

from typing import Any

import yaml


class FrontmatterError(ValueError):
    pass


class _PlainLoader(yaml.SafeLoader):
    """YAML without aliases: a few hundred bytes of nested `*name` references expand into
    billions of strings (a config of 489 bytes took 2.2 GB and 50 s to show in an error); a
    plan, a report or a config never needs one."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise yaml.composer.ComposerError(
                None, None, f"aliases (*{event.anchor}) are not accepted: write the value out",
                event.start_mark)
        return super().compose_node(parent, index)


def load_yaml(text: str) -> Any:
    """yaml.safe_load, refusing aliases (a YAMLError says where)."""
    return yaml.load(text, Loader=_PlainLoader)


def split(text: str) -> tuple[dict[str, Any], str]:
    """Return (fields, body). Raise FrontmatterError saying exactly what is wrong."""
    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise FrontmatterError("it must start with a line '---' opening the YAML frontmatter")
    for end in range(1, len(lines)):
        if lines[end].strip() in ("---", "..."):
            break
    else:
        raise FrontmatterError("the frontmatter is never closed by a second '---' line")
    try:
        data = load_yaml("".join(lines[1:end]))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (frontmatter line {mark.line + 1})" if mark is not None else ""
        raise FrontmatterError(f"the frontmatter is not valid YAML{where}: "
                               f"{getattr(exc, 'problem', exc)}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise FrontmatterError("the frontmatter must be a mapping of 'key: value' lines")
    return data, "".join(lines[end + 1:])


def join(data: dict[str, Any], body: str) -> str:
    head = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=1000)
    return f"---\n{head}---\n{body}"
