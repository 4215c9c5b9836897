"""handoff.protocol.diffs: git's unified diff read back, on what git itself prints."""

from __future__ import annotations

from handoff.protocol.diffs import FileDiff, Hunk, Line, parse, unquote


def test_counts_left_out_mean_one_and_marker_lines_are_not_content() -> None:
    text = ("diff --git a/x.py b/x.py\nindex 1..2 100644\n--- a/x.py\n+++ b/x.py\n"
            "@@ -3 +3 @@ def f():\n--- not a header\n\\ No newline at end of file\n"
            "+++ nor this\n\\ No newline at end of file\n")
    (only,) = parse(text)
    assert only == FileDiff("x.py", "x.py", "modified", (
        Hunk(3, 1, 3, 1, (Line(3, "-- not a header"),), (Line(3, "++ nor this"),)),))


def test_quoted_paths_decode_as_utf8() -> None:
    assert unquote('"a/caf\\303\\251.py"') == "a/café.py"
    assert unquote('"a/tab\\there \\"q\\" back\\\\slash"') == 'a/tab\there "q" back\\slash'
    assert unquote("a/plain name.py") == "a/plain name.py"
    text = ('diff --git "a/caf\\303\\251 x.py" "b/caf\\303\\251 x.py"\ndeleted file mode 100644\n'
            "Binary files \"a/caf\\303\\251 x.py\" and /dev/null differ\n")
    assert parse(text) == [FileDiff("café x.py", "", "deleted", (), binary=True)]
