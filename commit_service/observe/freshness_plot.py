"""The status page's per-table freshness plot as inline SVG: lag over the last hour as a line,
each commit as a tick on the time axis. Pure: samples and times in, markup out (no I/O, no
JavaScript, no plotting library), so the page needs no build step and the plot is unit-tested.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from commit_service.observe.lag import LagSample


@dataclass(frozen=True)
class PlotSize:
    width: int = 420
    height: int = 96
    pad_left: int = 44  # room for the lag axis labels
    pad_bottom: int = 16  # room for the time axis labels
    pad_top: int = 8


def _count(n: int) -> str:
    """1234 -> 1.2k; the axis labels are short."""
    for size, unit in ((1_000_000_000, "G"), (1_000_000, "M"), (1_000, "k")):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)


def freshness_svg(
    samples: Sequence[LagSample],
    commits_ms: Sequence[int],
    now_ms: int,
    window_ms: int,
    title: str,
    size: PlotSize = PlotSize(),
) -> Markup:
    """An ``<svg>`` of lag (records, left axis) from ``now_ms - window_ms`` to ``now_ms``; one tick
    per commit time in ``commits_ms``. Samples with unknown lag break the line."""
    plot_w = size.width - size.pad_left
    plot_h = size.height - size.pad_top - size.pad_bottom
    start = now_ms - window_ms
    known = [s for s in samples if s.lag is not None and s.at_ms >= start]
    top = max([s.lag for s in known if s.lag is not None] + [1])

    def x(at_ms: int) -> float:
        return size.pad_left + plot_w * min(max(at_ms - start, 0), window_ms) / window_ms

    def y(lag: int) -> float:
        return size.pad_top + plot_h * (1 - lag / top)

    parts = [
        f'<svg class="plot" role="img" width="{size.width}" height="{size.height}" '
        f'viewBox="0 0 {size.width} {size.height}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
        f'<line class="axis" x1="{size.pad_left}" y1="{size.pad_top + plot_h}" '
        f'x2="{size.width}" y2="{size.pad_top + plot_h}"/>',
        f'<text class="label" x="{size.pad_left - 4}" y="{size.pad_top + 8}" text-anchor="end">{_count(top)}</text>',
        f'<text class="label" x="{size.pad_left - 4}" y="{size.pad_top + plot_h}" text-anchor="end">0</text>',
        f'<text class="label" x="{size.pad_left}" y="{size.height - 2}">-{window_ms // 60_000} min</text>',
        f'<text class="label" x="{size.width}" y="{size.height - 2}" text-anchor="end">now</text>',
    ]
    for at in commits_ms:
        if start <= at <= now_ms:
            cx = x(at)
            parts.append(
                f'<line class="commit" x1="{cx:.1f}" y1="{size.pad_top + plot_h - 6}" '
                f'x2="{cx:.1f}" y2="{size.pad_top + plot_h}"/>'
            )
    line: list[str] = []
    for s in samples:
        if s.at_ms < start:
            continue
        if s.lag is None:
            parts.extend(_polyline(line))
            line = []
            continue
        line.append(f"{x(s.at_ms):.1f},{y(s.lag):.1f}")
    parts.extend(_polyline(line))
    if not known:
        parts.append(
            f'<text class="empty" x="{size.pad_left + plot_w / 2:.0f}" y="{size.pad_top + plot_h / 2:.0f}" '
            'text-anchor="middle">no lag measured yet</text>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def _polyline(points: list[str]) -> list[str]:
    if len(points) == 1:  # a single sample is a dot
        px, py = points[0].split(",")
        return [f'<circle class="lag" cx="{px}" cy="{py}" r="2"/>']
    return [f'<polyline class="lag" points="{" ".join(points)}"/>'] if points else []
