"""handoff.record.signing: the home's Ed25519 key, made once and private; what it signs
another key does not verify, and a key file that is a link is not one to sign with."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from handoff.errors import Tampered, UsageError
from handoff.record import signing


def test_the_key_is_made_once_private_and_signs_what_its_public_half_verifies(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    signature, key = signing.sign(home, b"manifest")
    private = home / "keys" / signing.PRIVATE
    assert oct(private.stat().st_mode & 0o777) == "0o600"
    assert oct((home / "keys").stat().st_mode & 0o777) == "0o700"
    assert (home / "keys" / signing.PUBLIC).read_text().strip() == key.text
    assert signing.own_public(home) == key, "made once: the same key on every use"
    assert key.verifies(signature, b"manifest")
    assert not key.verifies(signature, b"manifesT"), "one byte changed"
    other = signing.own_public(tmp_path / "other")
    assert other != key and not other.verifies(signature, b"manifest")
    assert key.fingerprint.startswith("sha256:") and key.fingerprint != other.fingerprint


def test_a_public_key_file_is_read_and_anything_else_refused(tmp_path: Path) -> None:
    _, key = signing.sign(tmp_path / "home", b"x")
    handed = tmp_path / "theirs.pub"
    handed.write_text(key.text + "\n")
    assert signing.read_public(handed) == key
    handed.write_text("not a key\n")
    with pytest.raises(UsageError, match="holds no Ed25519 public key"):
        signing.read_public(handed)
    with pytest.raises(UsageError, match="cannot read the key"):
        signing.read_public(tmp_path / "none.pub")


def test_a_key_file_that_is_a_link_or_open_to_others_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    signing.sign(home, b"x")
    private = home / "keys" / signing.PRIVATE
    private.chmod(0o644)
    with pytest.raises(Tampered, match="is not a private key file of yours"):
        signing.sign(home, b"x")
    planted = tmp_path / "planted.key"
    private.rename(planted)
    os.symlink(planted, private)
    with pytest.raises(Tampered, match="is not a key file handoff made"):
        signing.sign(home, b"x")
