"""What handoff takes in from outside, checked before it is used: files read with a size limit
and only as text, output kept only up to a number of bytes, folders it must be able to create.

Limits are in bytes, never lines: one 50 MB line is as big as a million short ones.
"""

from __future__ import annotations

import codecs
import os
import stat
import sys

from handoff.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:  # pathlib costs a lean `handoff submit` about 5 ms: typing only here
    from pathlib import Path

KIB = 1024
MIB = 1024 * KIB
#: a plan is prose plus a few commands; it is pasted into every brief
PLAN_LIMIT = 1 * MIB
#: a report is frontmatter, findings and a few sections
REPORT_LIMIT = 1 * MIB
#: a configuration file is a few dozen keys
CONFIG_LIMIT = 256 * KIB
#: a reason or note kept in state.json and shown by `status`
REASON_LIMIT = 2 * KIB


def read_text(path: str | os.PathLike[str], limit: int, what: str) -> str:
    """The UTF-8 text of path, reading at most limit + 1 bytes (so /dev/zero ends at once).

    Raises UsageError naming what and path when the file cannot be read, is no regular file
    (a FIFO would block the reader for ever, a device never end), is larger than limit, is not
    UTF-8 or holds NUL bytes (a binary file). `-` is stdin, read to its end (at most limit + 1
    bytes): how a host's `handoff start --plan -` is given a plan over ssh."""
    if str(path) == "-":
        data = sys.stdin.buffer.read(limit + 1)
        return _checked(data, limit, what, "(stdin)")
    try:
        # non-blocking: opening a FIFO nobody writes to returns at once instead of waiting
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise UsageError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UsageError(f"{what} {path} is not a regular file",
                             f"write {what} into a plain file and name that")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise UsageError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    return _checked(data, limit, what, path)


def _checked(data: bytes, limit: int, what: str, path: str | os.PathLike[str]) -> str:
    if len(data) > limit:
        raise UsageError(f"{what} {path} is larger than {_size(limit)}",
                         f"handoff reads at most {_size(limit)} of {what}: shorten it")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{what} {path} is not UTF-8 text (byte {exc.start}: "
                         f"{data[exc.start:exc.start + 1]!r})",
                         f"{what} must be a UTF-8 text file; convert it, e.g. with iconv") from None
    if "\x00" in text:
        raise UsageError(f"{what} {path} is a binary file (it holds NUL bytes)",
                         f"{what} must be a UTF-8 text file")
    return text


def _size(limit: int) -> str:
    return f"{limit // MIB} MiB" if limit % MIB == 0 else f"{limit // KIB} KiB"


def clip(text: str, limit: int) -> str:
    """text when its UTF-8 form fits in limit bytes; else its head and tail (limit bytes in
    all) around a note of how many bytes were cut: the first error and the last summary of
    some output both matter."""
    data = text.encode("utf-8", "replace")
    if len(data) <= limit:
        return text
    half = limit // 2
    return joined(data[:half], data[len(data) - half:], len(data) - 2 * half)


def joined(head: bytes, tail: bytes, dropped: int) -> str:
    """head and tail bytes as text, with the cut between them said out loud; a character split
    by the cut is left out rather than shown as garbage."""
    if not dropped:
        return (head + tail).decode("utf-8", "replace")
    # a decoder that is not told the input is final holds back an unfinished last character
    first = codecs.getincrementaldecoder("utf-8")("replace").decode(head, final=False)
    last = tail[_char_start(tail):].decode("utf-8", "replace")
    return f"{first}\n… [{dropped} bytes cut by handoff] …\n{last}"


def _char_start(data: bytes) -> int:
    """Skip UTF-8 continuation bytes (0b10xxxxxx) that lost their first byte to a cut."""
    skip = 0
    while skip < min(len(data), 3) and data[skip] & 0xC0 == 0x80:
        skip += 1
    return skip


def need_folder(path: Path, top: Path, why: str) -> None:
    """Refuse early when path, or a folder between top and it, exists but is not a folder:
    handoff would fail later, in the background, creating something inside it."""
    for part in (path, *path.relative_to(top).parents):
        where = part if part.is_absolute() else top / part
        if where != top and where.exists() and not where.is_dir():
            raise UsageError(f"{where} is a file, but handoff needs that path as a folder {why}",
                             f"move or rename {where}, then run the command again")
