"""Where quarantined files are recorded durably: one JSON object per dead letter under the table.

Written and read by the table's :class:`~commit_service.coordination.table_coordinator.TableCoordinator`
(on quarantine, on an admin's retry or release, and at start-up). The objects live under
``<table root>_lakegate/dead-letters/<id>.json``, next to the table they belong to and on the same
storage (S3 or local), so they survive restarts and moves of the service; Delta ignores folders
starting with ``_`` (VACUUM never deletes them). A state change rewrites the object whole.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from lakegate_core.status import DeadLetter

if TYPE_CHECKING:  # pyarrow loads when the production service builds its reader, not on import
    from commit_service.storage.reader import StorageReader

FOLDER = "_lakegate/dead-letters"


class ObjectDeadLetterStore:
    """The :class:`~commit_service.ports.DeadLetterStore` on the table's own storage, through the service's storage reader."""

    def __init__(self, storage: StorageReader, table_root: str) -> None:
        self.storage = storage
        self.folder = f"{table_root}{FOLDER}"

    def write(self, letter: DeadLetter) -> None:
        self.storage.put(f"{self.folder}/{letter.id}.json", json.dumps(letter.to_dict(), indent=1).encode())

    def load(self) -> list[DeadLetter]:
        return [
            DeadLetter.from_dict(json.loads(self.storage.read_own(uri)))
            for uri in self.storage.list_own(self.folder)
            if uri.endswith(".json")
        ]
