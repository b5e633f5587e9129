"""One table's dead letters: the files it quarantined, in memory and in their durable store.

Owned by the table's :class:`~commit_service.coordination.table_coordinator.TableCoordinator`,
which decides when a file is condemned (``commit_service.domain.failures``) and takes it out of
the buffer; this module builds the dead letter, records it in the
:class:`~commit_service.ports.DeadLetterStore` (``_lakegate/dead-letters/`` beside the table in
production) and answers the admin API's reads, retries and releases of it. Thread-safe.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace

from commit_service.domain.plan import PendingFile
from commit_service.errors import CommitError, ConflictError, NotFoundError
from commit_service.ports import DeadLetterStore
from lakegate_core.status import DeadLetter, DeadLetterState

logger = logging.getLogger(__name__)


class DeadLetters:
    """The dead letters of table ``table``; ``store`` None keeps them in memory only."""

    def __init__(self, table: str, store: DeadLetterStore | None, clock: Callable[[], float] = time.time) -> None:
        self.table = table
        self.store = store
        self.clock = clock
        self._letters: dict[str, DeadLetter] = {}
        self._lock = threading.Lock()

    def load(self) -> None:
        """Read every recorded dead letter (at start-up); a store that cannot be read is logged and
        read again at the next start (the letters stay on storage)."""
        if self.store is None:
            return
        try:
            letters = self.store.load()
        except Exception as exc:
            logger.warning("table %s: cannot read its dead letters: %s", self.table, exc)
            return
        with self._lock:
            self._letters = {letter.id: letter for letter in letters}

    def record(self, pending: PendingFile, exc: CommitError, attempts: int) -> DeadLetter:
        """The dead letter of ``pending``, condemned by ``exc``, durably recorded; raises whatever
        the store raises (the caller then keeps the file buffered)."""
        letter = DeadLetter(
            id=uuid.uuid4().hex,
            table=self.table,
            file=pending.file,
            manifest_id=pending.manifest_id,
            sidecar_id=pending.sidecar_id,
            code=exc.code,
            reason=exc.message,
            attempts=max(1, attempts),
            at_ms=int(self.clock() * 1000),
        )
        if self.store is not None:
            self.store.write(letter)
        with self._lock:
            self._letters[letter.id] = letter
        return letter

    def all(self) -> list[DeadLetter]:
        with self._lock:
            return list(self._letters.values())

    def get(self, letter_id: str) -> DeadLetter | None:
        with self._lock:
            return self._letters.get(letter_id)

    def quarantined(self, letter_id: str) -> DeadLetter:
        """The letter ``letter_id`` if it is still quarantined: else a 404 or a 409."""
        letter = self.get(letter_id)
        if letter is None:
            raise NotFoundError(f"no dead letter {letter_id!r} in table {self.table}")
        if letter.state is not DeadLetterState.QUARANTINED:
            raise ConflictError(f"dead letter {letter_id} is already {letter.state.value}")
        return letter

    def resolve(self, letter: DeadLetter, state: DeadLetterState) -> DeadLetter:
        """Mark ``letter`` retried or released, durably."""
        resolved = replace(letter, state=state, resolved_at_ms=int(self.clock() * 1000))
        if self.store is not None:
            self.store.write(resolved)
        with self._lock:
            self._letters[letter.id] = resolved
        return resolved

    def count_quarantined(self) -> int:
        with self._lock:
            return sum(1 for d in self._letters.values() if d.state is DeadLetterState.QUARANTINED)
