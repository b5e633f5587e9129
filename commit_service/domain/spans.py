"""What files' content was found to hold: the offsets a file really covers, learnt when a commit
refused its claim (a sink task that wrote a range twice leaves a longer file and orphans).

Pure: no I/O. Owned by :class:`~commit_service.domain.state.TableState`: a claim that contradicts
a known span is rejected; a span is forgotten once the table's offset passes it.
"""

from __future__ import annotations

from collections.abc import Callable

from lakegate_core.protocol import DataFile, OffsetSpan
from lakegate_core.types import TopicPartition


class ContentSpans:
    """Per partition, file path -> the offsets its content holds."""

    def __init__(self) -> None:
        self._spans: dict[TopicPartition, dict[str, OffsetSpan]] = {}

    def __bool__(self) -> bool:
        return bool(self._spans)

    def learn(self, tp: TopicPartition, path: str, holds: OffsetSpan) -> None:
        self._spans.setdefault(tp, {})[path] = holds

    def of(self, f: DataFile) -> OffsetSpan | None:
        """What ``f``'s content was found to hold, if a claim of it was refused for that."""
        return self._spans.get(f.tp, {}).get(f.path)

    def refusal(self, f: DataFile) -> str | None:
        """Why ``f`` contradicts what a file's content was found to hold, or None."""
        for path, span in self._spans.get(f.tp, {}).items():
            if path == f.path and f.end_offset < span.last:
                return f"its content holds offsets {span}: claim {f.start_offset}..{span.last}, not ..{f.end_offset}"
            if path != f.path and span.first < f.start_offset <= span.last:
                return (
                    f"an orphan of a re-written range: it starts inside offsets {span}, which {path} holds "
                    "(a sink task wrote this range twice)"
                )
        return None

    def prune(self, next_offset: Callable[[TopicPartition], int]) -> None:
        """Forget the spans each partition's next offset has passed."""
        for tp, spans in list(self._spans.items()):
            base = next_offset(tp)
            kept = {path: span for path, span in spans.items() if span.last >= base}
            if kept:
                self._spans[tp] = kept
            else:
                del self._spans[tp]

    def forget(self, tp: TopicPartition) -> None:
        self._spans.pop(tp, None)
