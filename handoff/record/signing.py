"""The key a handoff home signs its evidence bundles with (handoff.loop.evidence): an Ed25519
key from PyCA's `cryptography`, made once, kept in the home (which no peer's fence shows),
the private half readable by its user alone.

A bundle is checked against a public key the checker trusts: this home's own, or the one a
colleague handed over (`handoff verify --key FILE`). The public key a bundle carries says only
whose it claims to be; it is never trusted for itself.
"""

from __future__ import annotations

import base64
import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from handoff.errors import Tampered, UsageError
from handoff.record.store import atomic_write, private_dir

KEYS = "keys"
PRIVATE = "evidence.key"
PUBLIC = "evidence.pub"
#: a public key file as handed over: one line, the raw key in base64 (`handoff verify --key`)
PUBLIC_HINT = "a public key file holds one line: the key in base64, as keys/evidence.pub has it"


@dataclass(frozen=True)
class PublicKey:
    raw: bytes

    @property
    def text(self) -> str:
        return base64.b64encode(self.raw).decode("ascii")

    @property
    def fingerprint(self) -> str:
        """A short name for the key, as a person compares two: sha256 of the raw key."""
        return "sha256:" + hashlib.sha256(self.raw).hexdigest()[:24]

    def verifies(self, signature: bytes, data: bytes) -> bool:
        try:
            Ed25519PublicKey.from_public_bytes(self.raw).verify(signature, data)
        except (InvalidSignature, ValueError):
            return False
        return True


def public_key(text: str, where: str) -> PublicKey:
    """A public key as its file (or a bundle) gives it: the raw key in base64."""
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except ValueError:
        raw = b""
    if len(raw) != 32:
        raise UsageError(f"{where} holds no Ed25519 public key", PUBLIC_HINT)
    return PublicKey(raw)


def read_public(path: Path) -> PublicKey:
    """A public key a colleague handed over (`--key FILE`)."""
    try:
        text = path.read_text(encoding="ascii", errors="replace")[:200]
    except OSError as exc:
        raise UsageError(f"cannot read the key {path}: {exc.strerror}", PUBLIC_HINT) from None
    return public_key(text, str(path))


def _private(home: Path) -> Ed25519PrivateKey:
    """This home's private key, made on first use. It is read only when it is a regular file
    of this user's, open to no one else (a link, or a file another could have written, is
    not a key to sign with)."""
    folder = private_dir(home / KEYS)
    path = folder / PRIVATE
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return _made(folder)
    except OSError as exc:
        raise Tampered(f"{path} is not a key file handoff made ({exc.strerror})",
                       "look at it; move it aside to have a new key made") from None
    with os.fdopen(fd, "rb") as found:
        info = os.fstat(found.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or \
                info.st_mode & 0o077:
            raise Tampered(f"{path} is not a private key file of yours (mode "
                           f"{oct(info.st_mode & 0o777)}, owner {info.st_uid})",
                           "look at it; move it aside to have a new key made")
        data = found.read(4096)
    key = serialization.load_pem_private_key(data, password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise Tampered(f"{path} holds no Ed25519 key", "move it aside to have a new key made")
    return key


def _made(folder: Path) -> Ed25519PrivateKey:
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    path = folder / PRIVATE
    try:  # one maker wins; a second start meanwhile reads the winner's
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return _private(folder.parent)
    with os.fdopen(fd, "wb") as out:
        out.write(pem)
        out.flush()
        os.fsync(out.fileno())
    atomic_write(folder / PUBLIC, PublicKey(_raw(key)).text + "\n")
    return key


def _raw(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.Raw,
                                         serialization.PublicFormat.Raw)


def own_public(home: Path) -> PublicKey:
    """This home's public key (its key made if it has none yet)."""
    return PublicKey(_raw(_private(home)))


def sign(home: Path, data: bytes) -> tuple[bytes, PublicKey]:
    """data signed with this home's key: the signature, and the public key that checks it."""
    key = _private(home)
    return key.sign(data), PublicKey(_raw(key))
