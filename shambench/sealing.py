"""Caches prove what they hold or are ignored: the one seal of every store kept on disk (the response cache, the
segmentation cache, the kept corpora and what is kept beside them).

A value is sealed by a BLAKE2b digest of its bytes keyed with what it is stored under (a key longer than BLAKE2b's
64-byte limit is hashed first), so a value edited, truncated, moved under another key, or written before values
were sealed, fails its seal. A store treats such a value as a miss (computed or asked again, and stored again) and
says so in one warning (`Sealer.reject`). The seal catches a doctored or damaged file, not a forger who recomputes
it with this code: the caches are the user's own, like the run directories.
"""

from __future__ import annotations

import hashlib
import warnings

# Bytes of a seal.
SEAL_BYTES = 16
# The longest key BLAKE2b takes as it is.
_MAX_KEY = 64


class Sealer:
    """The seals of one store's values, and its one warning when some fail them."""

    def __init__(self, store: str):
        self.store = store
        """How its warning begins: the store, and what happens to a value that fails where it says so (e.g.
        `response cache /path/responses.sqlite`)."""
        self._warned = False

    @staticmethod
    def seal(key: bytes, body: bytes | memoryview) -> bytes:
        """The seal of `body` stored under `key`."""
        if len(key) > _MAX_KEY:
            key = hashlib.blake2b(key, digest_size=32).digest()
        return hashlib.blake2b(body, digest_size=SEAL_BYTES, key=key).digest()

    @classmethod
    def proves(cls, key: bytes, body: bytes, seal: bytes) -> bool:
        """Whether `seal` is that of `body` under `key`."""
        return len(seal) == SEAL_BYTES and seal == cls.seal(key, body)

    @classmethod
    def sealed(cls, key: bytes, body: bytes) -> bytes:
        """The stored form of `body` under `key`: the body, then its seal."""
        return body + cls.seal(key, body)

    @classmethod
    def opened(cls, key: bytes, stored: bytes) -> bytes | None:
        """The body of a value in its stored form (`sealed`) under `key`, or None when it does not carry its seal."""
        body, seal = stored[:-SEAL_BYTES], stored[-SEAL_BYTES:]
        return body if len(stored) > SEAL_BYTES and cls.proves(key, body, seal) else None

    def reject(self, what: str, stacklevel: int = 3) -> None:
        """Warn that stored values failed their seal or checks (`what`: which, and what happens to them); once per
        sealer, however many fail. The warning points `stacklevel` frames up (3: the caller of the store's method
        that calls this)."""
        if not self._warned:
            self._warned = True
            warnings.warn(f"{self.store}: {what}", RuntimeWarning, stacklevel=stacklevel)
