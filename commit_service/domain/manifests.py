"""What became of each manifest a table was sent: accepted, committed (at which version) or
rejected (why), followed as its files leave the table's buffer.

Pure: no I/O. Owned by :class:`~commit_service.domain.state.TableState`; the sidecar reads the
answer through ``GET /v1/manifests/<id>``. The newest :data:`MAX_TRACKED_MANIFESTS` are kept.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

from commit_service.domain.plan import Place
from lakegate_core.protocol import FileStatus
from lakegate_core.status import ManifestState

MAX_TRACKED_MANIFESTS = 10_000


@dataclass
class _ManifestTrack:
    pending: set[Place] = field(default_factory=set)
    state: ManifestState = ManifestState.ACCEPTED
    version: int | None = None
    reason: str | None = None


class ManifestBook:
    """The manifests of one table; not thread-safe (the state's callers lock)."""

    def __init__(self) -> None:
        self._manifests: OrderedDict[str, _ManifestTrack] = OrderedDict()
        # a buffered file's place -> the other manifests that named it (a sender's retry under a
        # new manifest id): their status follows the file as its own manifest's does
        self._followers: dict[Place, tuple[str, ...]] = {}

    def holds(self, manifest_id: str, here: Place) -> None:
        """Manifest ``manifest_id`` names the buffered file at ``here``."""
        self._track(manifest_id).pending.add(here)

    def follows(self, manifest_id: str, here: Place, owner: str) -> None:
        """Manifest ``manifest_id`` names again the file at ``here`` that ``owner`` brought."""
        self.holds(manifest_id, here)
        if manifest_id != owner:
            followers = self._followers.get(here, ())
            if manifest_id not in followers:
                self._followers[here] = (*followers, manifest_id)

    def settle(self, manifest_id: str, verdicts: Iterable[tuple[FileStatus, str | None]], version: int) -> None:
        """After all files of a manifest were offered: with nothing left buffered it is either
        committed already (some file was in the table, at ``version`` or before) or rejected
        (every file was)."""
        track = self._track(manifest_id)
        if track.pending:
            return
        verdicts = list(verdicts)
        if verdicts and all(status is FileStatus.REJECTED for status, _ in verdicts):
            track.state, track.reason = ManifestState.REJECTED, verdicts[0][1]
        elif track.state is ManifestState.ACCEPTED:
            track.state, track.version = ManifestState.COMMITTED, version

    def left(self, here: Place, owner: str, version: int, *, rejected: str | None = None) -> None:
        """The buffered file at ``here``, brought by manifest ``owner``, left the buffer: its
        offsets are in the table (at ``version``), or it was dropped for ``rejected``. Every
        manifest that named it follows: committed once none of its files is still buffered."""
        for manifest_id in (owner, *self._followers.pop(here, ())):
            track = self._manifests.get(manifest_id)
            if track is None:
                continue
            track.pending.discard(here)
            if rejected is not None:
                track.state, track.reason = ManifestState.REJECTED, rejected
            elif not track.pending:
                track.state, track.version = ManifestState.COMMITTED, version

    def state(self, manifest_id: str) -> tuple[ManifestState, int | None, str | None] | None:
        track = self._manifests.get(manifest_id)
        return None if track is None else (track.state, track.version, track.reason)

    def followers(self) -> dict[Place, tuple[str, ...]]:
        """Which files other manifests follow (empty once every followed file has left)."""
        return dict(self._followers)

    def _track(self, manifest_id: str) -> _ManifestTrack:
        track = self._manifests.get(manifest_id)
        if track is None:
            track = self._manifests[manifest_id] = _ManifestTrack()
            while len(self._manifests) > MAX_TRACKED_MANIFESTS:
                self._manifests.popitem(last=False)
        return track
