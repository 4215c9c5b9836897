"""git's unified diff, read: which files a change touched, and which lines it removed and added.

Two readers need it: the weakened-tests check (handoff.loop.weakened: the test lines a change
removed or added) and a later review's scope (handoff.protocol.ledger: the new-side lines the
fix rounds changed). Both read what `git diff` prints, so this reads that format and only
that: the `diff --git` header and its extended lines (new, deleted, renamed, copied files,
modes, binary), `---`/`+++`, and hunks whose `@@ -a,b +c,d @@` counts say where each one
ends (a removed line reading `--- x` is still a removed line).

Pure and stdlib only. A diff comes from a repository a peer worked in, so nothing in it is
trusted: what cannot be read is skipped, never raised.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

ADDED, DELETED, MODIFIED, RENAMED = "added", "deleted", "modified", "renamed"
#: `@@ -3 +3 @@` has its counts left out: each is 1
HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
#: what a backslash escape in a quoted path stands for (octal escapes aside)
ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


@dataclass(frozen=True)
class Line:
    number: int  # on its side: the old side for removed lines, the new side for added ones
    text: str  # without the leading '+' or '-'


@dataclass(frozen=True)
class Hunk:
    old_start: int
    old_count: int
    new_start: int
    new_count: int
    removed: tuple[Line, ...]
    added: tuple[Line, ...]
    #: where lines were removed with none added in their stead: the new-side line just
    #: before each such place (0: the top of the file)
    deletions: tuple[int, ...] = ()


@dataclass(frozen=True)
class FileDiff:
    old_path: str  # "" for an added file
    new_path: str  # "" for a deleted file
    status: str  # ADDED, DELETED, MODIFIED or RENAMED
    hunks: tuple[Hunk, ...]
    binary: bool = False

    @property
    def path(self) -> str:
        return self.new_path or self.old_path


def unquote(raw: str) -> str:
    """A path as git printed it: C-quoted when it holds a quote, a backslash, a control or
    (core.quotePath, the default) a non-ASCII byte, whose octal escapes are UTF-8 bytes."""
    if len(raw) < 2 or not (raw.startswith('"') and raw.endswith('"')):
        return raw
    out = bytearray()
    body, i = raw[1:-1], 0
    while i < len(body):
        char = body[i]
        if char != "\\" or i + 1 == len(body):
            out += char.encode("utf-8", "surrogateescape")
            i += 1
        elif body[i + 1] in "01234567":
            digits = re.match(r"[0-7]{1,3}", body[i + 1:])
            assert digits is not None
            out.append(int(digits.group(), 8) & 0xFF)
            i += 1 + len(digits.group())
        else:
            out.append(ESCAPES.get(body[i + 1], ord(body[i + 1]) & 0xFF))
            i += 2
    return out.decode("utf-8", "replace")


def _quoted_end(text: str) -> int:
    """The index just past the closing quote of the quoted path text starts with (-1: none)."""
    i = 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == '"':
            return i + 1
        else:
            i += 1
    return -1


def _strip(path: str, prefix: str) -> str:
    return path[len(prefix):] if path.startswith(prefix) else path


def header_paths(rest: str) -> tuple[str, str]:
    """(old, new) of `diff --git <rest>`, prefixes off; ('', '') when it cannot tell. Paths
    with spaces are not quoted there, so an unquoted pair is split where both halves name
    the same file (the header of every change but a rename, whose paths come from its
    `rename from`/`rename to` lines instead)."""
    if rest.startswith('"'):
        end = _quoted_end(rest)
        if end < 0 or rest[end:end + 1] != " ":
            return "", ""
        old, new = rest[:end], rest[end + 1:]
    elif rest.endswith('"') and ' "' in rest:
        old, new = rest.split(' "', 1)
        new = '"' + new
    else:
        half = len(rest) // 2
        if len(rest) % 2 == 1 and rest[half] == " " and rest[2:half] == rest[half + 3:]:
            old, new = rest[:half], rest[half + 1:]
        elif " b/" in rest:
            old, new = rest.split(" b/", 1)
            new = "b/" + new
        else:
            return "", ""
    return _strip(unquote(old), "a/"), _strip(unquote(new), "b/")


def _side(raw: str, prefix: str) -> str | None:
    """The path of a `---`/`+++` line's rest: '' for /dev/null, None when unreadable. git
    ends an unquoted path holding a space with a tab, which is not part of it."""
    if raw.startswith('"'):
        end = _quoted_end(raw)
        return None if end < 0 else _strip(unquote(raw[:end]), prefix)
    raw = raw.split("\t", 1)[0]
    if raw == "/dev/null":
        return ""
    return _strip(raw, prefix) or None


@dataclass
class _File:
    """One file's diff while it is read."""

    old: str
    new: str
    status: str = MODIFIED
    binary: bool = False
    renamed: bool = False
    hunks: list[Hunk] = field(default_factory=list)

    def done(self) -> FileDiff | None:
        if not self.old and not self.new:
            return None
        old = "" if self.status == ADDED else self.old
        new = "" if self.status == DELETED else self.new
        return FileDiff(old, new, self.status, tuple(self.hunks), self.binary)


def _hunk(header: re.Match[str], lines: list[str], at: int) -> tuple[Hunk, int]:
    """The hunk whose header matched, read from lines[at:] as far as its counts go (or to
    the first line that cannot be part of it); and the index of the line after it."""
    old_start, new_start = int(header.group(1)), int(header.group(3))
    old_count = 1 if header.group(2) is None else int(header.group(2))
    new_count = 1 if header.group(4) is None else int(header.group(4))
    old_left, new_left = old_count, new_count
    # with no new-side lines, git names the line before the hunk's place, not its first
    old_no, new_no = old_start, new_start + (1 if new_count == 0 else 0)
    removed: list[Line] = []
    added: list[Line] = []
    deletions: list[int] = []
    change = [0, 0]  # lines removed and added since the last context line

    def close() -> None:
        if change[0] and not change[1]:
            deletions.append(new_no - 1)
        change[:] = [0, 0]

    while at < len(lines) and (old_left > 0 or new_left > 0):
        line = lines[at]
        mark, text = line[:1], line[1:]
        if mark == "-" and old_left > 0:
            removed.append(Line(old_no, text))
            old_no, old_left, change[0] = old_no + 1, old_left - 1, change[0] + 1
        elif mark == "+" and new_left > 0:
            added.append(Line(new_no, text))
            new_no, new_left, change[1] = new_no + 1, new_left - 1, change[1] + 1
        elif mark in (" ", "") and old_left > 0 and new_left > 0:
            # context (diff.interHunkContext puts some even in a -U0 diff); an empty line is
            # a blank context line where diff.suppressBlankEmpty is set
            close()
            old_no, new_no = old_no + 1, new_no + 1
            old_left, new_left = old_left - 1, new_left - 1
        elif mark != "\\":  # `\ No newline at end of file` belongs to the line before it
            break
        at += 1
    close()
    while at < len(lines) and lines[at].startswith("\\"):
        at += 1
    return Hunk(old_start, old_count, new_start, new_count, tuple(removed), tuple(added),
                tuple(deletions)), at


def parse(diff: str) -> list[FileDiff]:
    """The files of a `git diff` (any context, renames detected or not), in its order."""
    lines = diff.split("\n")  # not splitlines: a form feed or \x1c inside a line is content
    files: list[FileDiff] = []
    current: _File | None = None
    at = 0
    while at < len(lines):
        line = lines[at].removesuffix("\r")  # hunks' lines are read as they are, in _hunk
        at += 1
        if line.startswith("diff --git "):
            if current is not None and (done := current.done()) is not None:
                files.append(done)
            current = _File(*header_paths(line[len("diff --git "):]))
            continue
        if current is None:
            continue
        header = HUNK.match(line)
        if header:
            hunk, at = _hunk(header, lines, at)
            current.hunks.append(hunk)
        elif not current.hunks:
            _extended(current, line)
    if current is not None and (done := current.done()) is not None:
        files.append(done)
    return files


def _extended(current: _File, line: str) -> None:
    """One line between a file's `diff --git` header and its first hunk."""
    if line.startswith("new file mode"):
        current.status = ADDED
    elif line.startswith("deleted file mode"):
        current.status = DELETED
    elif line.startswith(("rename from ", "rename to ")):
        current.status, current.renamed = RENAMED, True
        path = unquote(line.split(" ", 2)[2])
        if line.startswith("rename from "):
            current.old = path
        else:
            current.new = path
    elif line.startswith("copy to "):
        # a copy (-C) adds a file; its source stays where it was
        current.status, current.old, current.new = ADDED, "", unquote(line[len("copy to "):])
    elif line.startswith(("Binary files ", "GIT binary patch")):
        current.binary = True
    elif line.startswith(("--- ", "+++ ")) and not current.renamed:
        side = _side(line[4:], "a/" if line[0] == "-" else "b/")
        if side:  # /dev/null says nothing the mode lines did not
            if line[0] == "-":
                current.old = side
            else:
                current.new = side


def changed_lines(files: Sequence[FileDiff]) -> dict[str, set[int]]:
    """The new-side lines each file's diff added or changed, by its path (`FileDiff.path`).

    Lines removed with none added in their stead (`@@ -5,2 +4,0 @@`) changed the spot
    between two new-side lines: both count (here 4 and 5), so a finding 'at' that spot is on
    a changed line. Every file the diff touched has its key, with no lines when nothing in it
    was a line (binary, mode only, a rename alone, a deleted file: its path at the base)."""
    changed: dict[str, set[int]] = {}
    for diff in files:
        lines = changed.setdefault(diff.path, set())
        if diff.status == DELETED:
            continue
        for hunk in diff.hunks:
            lines.update(line.number for line in hunk.added)
            lines.update(n for spot in hunk.deletions for n in (spot, spot + 1) if n > 0)
    return changed
