"""handoff.protocol.diffs: git's unified diff read back, on what git itself prints."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from handoff.protocol.diffs import FileDiff, Hunk, Line, changed_lines, parse
from tests.conftest import git

NOTES = "one\ntwo\nthree\nfour\nfive\n"
RENAMED = "a = 1\nb = 2\nc = 3\nd = 4\n"


def diff_of(repo: Path, *args: str) -> str:
    """What `git diff` prints, as it prints it (tests.conftest.git strips the end)."""
    return subprocess.run(["git", "-C", str(repo), "diff", "--no-color", "--no-ext-diff", *args],
                          check=True, capture_output=True, text=True, timeout=60).stdout


@pytest.fixture
def changed(repo: Path) -> tuple[Path, str]:
    """repo with one commit that adds, deletes, renames with edits, changes a binary file, a
    mode alone, lines in a file (one removed, one changed, one added) and files whose names
    git quotes; and the base commit."""
    (repo / "notes.txt").write_text(NOTES, encoding="utf-8")
    (repo / "old name.py").write_text(RENAMED, encoding="utf-8")
    (repo / "café.py").write_text("x = 1\n", encoding="utf-8")
    (repo / 'quote"d.py').write_text("q = 1\n", encoding="utf-8")
    (repo / "gone.txt").write_text("bye\n", encoding="utf-8")
    (repo / "blob.bin").write_bytes(bytes(range(256)))
    (repo / "run.sh").write_text("echo hi\n", encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    base = git(repo, "rev-parse", "HEAD")
    (repo / "notes.txt").write_text("one\nthree\nFOUR\nfive\nsix\n", encoding="utf-8")
    git(repo, "mv", "old name.py", "new name.py")
    (repo / "new name.py").write_text("a = 1\nb = 2\nc = 30\nd = 4\n", encoding="utf-8")
    (repo / "café.py").write_text("x = 2", encoding="utf-8")  # no newline at the end
    (repo / 'quote"d.py').write_text("q = 2\n", encoding="utf-8")
    (repo / "gone.txt").unlink()
    (repo / "blob.bin").write_bytes(bytes(range(255, -1, -1)))
    (repo / "run.sh").chmod(0o755)
    (repo / "fresh").mkdir()
    (repo / "fresh" / "new.txt").write_text("first\nsecond\n", encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "change")
    return repo, base


def by_path(files: list[FileDiff]) -> dict[str, FileDiff]:
    return {f.path: f for f in files}


def test_every_kind_of_change_in_a_no_context_diff(changed: tuple[Path, str]) -> None:
    repo, base = changed
    text = diff_of(repo, "-U0", "-M", f"{base}...HEAD")
    assert '"a/caf\\303\\251.py"' in text and "\\ No newline at end of file" in text
    files = by_path(parse(text))
    assert set(files) == {"notes.txt", "new name.py", "café.py", 'quote"d.py', "gone.txt",
                          "blob.bin", "run.sh", "fresh/new.txt"}
    assert files["notes.txt"] == FileDiff("notes.txt", "notes.txt", "modified", (
        Hunk(2, 1, 1, 0, (Line(2, "two"),), (), (1,)),
        Hunk(4, 1, 3, 1, (Line(4, "four"),), (Line(3, "FOUR"),)),
        Hunk(5, 0, 5, 1, (), (Line(5, "six"),)),
    ))
    assert files["new name.py"] == FileDiff("old name.py", "new name.py", "renamed", (
        Hunk(3, 1, 3, 1, (Line(3, "c = 3"),), (Line(3, "c = 30"),)),))
    assert files["café.py"] == FileDiff("café.py", "café.py", "modified", (
        Hunk(1, 1, 1, 1, (Line(1, "x = 1"),), (Line(1, "x = 2"),)),))
    assert files['quote"d.py'].hunks[0].added == (Line(1, "q = 2"),)
    assert files["gone.txt"] == FileDiff("gone.txt", "", "deleted", (
        Hunk(1, 1, 0, 0, (Line(1, "bye"),), (), (0,)),))
    assert files["blob.bin"] == FileDiff("blob.bin", "blob.bin", "modified", (), binary=True)
    assert files["run.sh"] == FileDiff("run.sh", "run.sh", "modified", ())
    assert files["fresh/new.txt"] == FileDiff("", "fresh/new.txt", "added", (
        Hunk(0, 0, 1, 2, (), (Line(1, "first"), Line(2, "second"))),))


def test_changed_lines_are_the_new_side_s(changed: tuple[Path, str]) -> None:
    """notes.txt: 'two' removed between new lines 1 and 2, line 3 rewritten, line 5 added."""
    repo, base = changed
    assert changed_lines(parse(diff_of(repo, "-U0", "-M", f"{base}...HEAD"))) == {
        "notes.txt": {1, 2, 3, 5}, "new name.py": {3}, "café.py": {1}, 'quote"d.py': {1},
        "gone.txt": set(), "blob.bin": set(), "run.sh": set(), "fresh/new.txt": {1, 2}}


def test_context_and_binary_patches_read_the_same(changed: tuple[Path, str]) -> None:
    """With context (-U3) and `--binary`, the same files and the same lines."""
    repo, base = changed
    plain = parse(diff_of(repo, "-U0", "-M", f"{base}...HEAD"))
    full = parse(diff_of(repo, "-M", "--binary", f"{base}...HEAD"))
    assert [(f.old_path, f.new_path, f.status, f.binary) for f in full] == \
        [(f.old_path, f.new_path, f.status, f.binary) for f in plain]
    assert changed_lines(full) == changed_lines(plain)
    notes = by_path(full)["notes.txt"]
    assert [line for h in notes.hunks for line in h.removed] == [Line(2, "two"), Line(4, "four")]
    assert [line for h in notes.hunks for line in h.added] == [Line(3, "FOUR"), Line(5, "six")]


def test_without_rename_detection_a_rename_is_a_delete_and_an_add(
        changed: tuple[Path, str]) -> None:
    repo, base = changed
    files = by_path(parse(diff_of(repo, "-U0", "--no-renames", f"{base}...HEAD")))
    assert files["old name.py"].status == "deleted"
    assert files["new name.py"].status == "added"
    assert [line.text for line in files["new name.py"].hunks[0].added] == \
        ["a = 1", "b = 2", "c = 30", "d = 4"]


def test_a_pure_deletion_marks_the_same_spot_with_or_without_context(repo: Path) -> None:
    (repo / "six.txt").write_text("l1\nl2\nl3\nl4\nl5\nl6\n", encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "six")
    (repo / "six.txt").write_text("l1\nl2\nl4\nl5\nl6\n", encoding="utf-8")
    assert changed_lines(parse(diff_of(repo, "-U0"))) == {"six.txt": {2, 3}}
    assert changed_lines(parse(diff_of(repo, "-U1"))) == {"six.txt": {2, 3}}
    (hunk,) = parse(diff_of(repo, "-U1"))[0].hunks
    assert (hunk.old_start, hunk.old_count, hunk.new_start, hunk.new_count) == (2, 3, 2, 2)


def test_odd_input_is_skipped_never_raised(changed: tuple[Path, str]) -> None:
    repo, base = changed
    text = diff_of(repo, "-U0", "-M", f"{base}...HEAD")
    for cut in range(len(text)):
        parse(text[:cut])
        parse(text[cut:])
    assert parse("") == []
    assert parse("@@ -1 +1 @@\n-a\n+b\n") == []  # no file header: nothing to say whose
    assert parse("diff --git\n@@ -x +y @@\n") == []
    (short,) = parse("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,5 +1,5 @@\n-a\n")
    assert short.hunks[0].removed == (Line(1, "a"),)
