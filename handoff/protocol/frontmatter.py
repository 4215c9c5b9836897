"""Markdown with a YAML frontmatter block: machine fields above, human text below."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

import yaml


class FrontmatterError(ValueError):
    pass


#: nodes that aliases may add, in all, to one document
ALIAS_EXPANSION = 10_000


class _BoundedLoader(yaml.SafeLoader):
    """YAML whose aliases may not expand without bound: a few hundred bytes of nested `*name`
    references stand for billions of strings (a config of 489 bytes took 2.2 GB and 50 s to
    show in an error). An alias costs the size of the node it repeats; past ALIAS_EXPANSION
    nodes in all the document is refused, at once."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.expanded = 0
        self.sizes: dict[int, int] = {}

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            node = self.anchors.get(event.anchor)
            if node is not None:
                self.expanded += self.size(node, set())
                if self.expanded > ALIAS_EXPANSION:
                    raise yaml.composer.ComposerError(
                        None, None, f"its aliases (*{event.anchor} and others) stand for more "
                        f"than {ALIAS_EXPANSION} values: write the values out", event.start_mark)
        return super().compose_node(parent, index)

    def size(self, node: yaml.Node, seen: set[int]) -> int:
        """The values node stands for, its aliases expanded (a node inside itself counts once)."""
        if id(node) in self.sizes:
            return self.sizes[id(node)]
        if id(node) in seen or isinstance(node, yaml.ScalarNode):
            return 1
        seen.add(id(node))
        parts = [p for pair in node.value for p in pair] \
            if isinstance(node, yaml.MappingNode) else list(node.value)
        total = 1 + sum(self.size(part, seen) for part in parts)
        self.sizes[id(node)] = total
        return total


def load_yaml(text: str) -> Any:
    """yaml.safe_load, with aliases bounded (a YAMLError says where)."""
    return yaml.load(text, Loader=_BoundedLoader)


def split(text: str) -> tuple[dict[str, object], str]:
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


class _Dumper(yaml.SafeDumper):
    """YAML's safe dumper, which writes a word of handoff's vocabularies (a StrEnum: a phase,
    a verdict) as the plain string it is."""


_Dumper.add_multi_representer(StrEnum, lambda dumper, word: dumper.represent_str(str(word)))


def join(data: Mapping[str, object], body: str) -> str:
    head = yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=1000)
    return f"---\n{head}---\n{body}"
