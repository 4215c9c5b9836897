"""handoff.machinery.credentials: a token in a git config (a remote's URL, an insteadOf, an
extraHeader) is taken out of the copy the fences show and of what handoff says. Real git
writes the config here."""

from __future__ import annotations

from handoff.machinery.credentials import redact


def test_a_urls_userinfo_and_an_extraheader_value_are_taken_out() -> None:
    assert redact("fetch https://ann:ghp_s3cret@github.com/o/r.git failed") == (
        "fetch https://github.com/o/r.git failed")
    assert redact("ssh://git@host:22/r and http://tok@h/x") == "ssh://host:22/r and http://h/x"
    assert redact("[http]\n\textraHeader = Authorization: Bearer abc\n") == (
        "[http]\n\textraHeader = [taken out by handoff]\n")
    plain = "https://github.com/o/r.git and mail ann@example.com"
    assert redact(plain) == plain, "an address without a scheme is no URL's userinfo"
