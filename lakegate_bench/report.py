"""The multi-part benchmark's report: Markdown tables of the JSON in ``--out-dir``, and a plot per part."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

CHECKPOINT_MODES = ("inline", "none", "background")  # checkpoints: the modes, in the order they run


def report(out_dir: Path) -> str:
    """Markdown tables of the parts' JSON files found in ``out_dir`` (for docs/performance.md)."""
    out: list[str] = []

    def load(part: str) -> dict[str, Any] | None:
        path = out_dir / f"{part}.json"
        return json.loads(path.read_text()) if path.is_file() else None

    def table(header: list[str], rows: Iterable[list[Any]]) -> None:
        out.extend(["| " + " | ".join(header) + " |", "|" + "---|" * len(header)])
        out.extend("| " + " | ".join(str(c) for c in row) + " |" for row in rows)
        out.append("")

    if (d := load("commit")) is not None:
        table(
            ["files", "Lakegate, footers read ahead", "Lakegate, cold", "Spark rewrite", "rewrite / Lakegate"],
            [
                [f"{r['files']:,}", f"{r['lakegate_read_ahead_s']:.2f} s", f"{r['lakegate_cold_s']:.2f} s"]
                + [f"{r['spark_rewrite_s']:.2f} s", f"{r['rewrite_over_lakegate']}x"]
                for r in d["results"]
            ],
        )
    if (d := load("checkpoints")) is not None:
        table(
            [f"{d['commits']} commits of {d['files_per_commit']} files", "p50", "p99", "max", "p99/p50"],
            [
                [f"checkpoints {m}", *(f"{d[m][k]:.3f} s" for k in ("p50_s", "p99_s", "max_s"))]
                + [f"{d[m]['p99_s'] / d[m]['p50_s']:.2f}"]
                for m in CHECKPOINT_MODES
                if m in d
            ],
        )
    if (d := load("history")) is not None:
        table(
            ["table version", "p50", "p99"],
            [[f"v{r['version']:,}", f"{r['p50_s']:.2f} s", f"{r['p99_s']:.2f} s"] for r in d["results"]],
        )
    if (d := load("jsonl")) is not None:
        table(
            ["gzip JSON-lines files", "commit"],
            [[f"{r['files']:,} x {r['lines_per_file']:,} lines", f"{r['commit_s']:.2f} s"] for r in d["results"]],
        )
    if (d := load("upsert")) is not None:
        out += [f"A table of {d['table_rows']:,} rows in {d['table_files']} files; one round of changes.", ""]
        table(
            ["changed keys", "keys", "Lakegate, deletion vectors", "files marked", "Lakegate, copy-on-write"]
            + ["files rewritten", "Delta MERGE, deletion vectors"],
            [
                [f"{r['changed_keys']:,}", r["keys"], f"{r['lakegate_dv_s']:.2f} s"]
                + [f"{r['files_with_new_vectors']}/{r['table_files']}", f"{r['lakegate_s']:.2f} s"]
                + [f"{r['files_rewritten']}/{r['table_files']}", f"{r['delta_merge_dv_s']:.2f} s"]
                for r in d["results"]
            ],
        )
    if (d := load("http")) is not None:
        table(
            ["clients", "manifests/s", "p50", "p90", "p99", "non-2xx"],
            [
                [
                    r["clients"],
                    f"{r['manifests_per_s']:,.0f}",
                    *(f"{r.get(k)} ms" for k in ("p50_ms", "p90_ms", "p99_ms")),
                ]
                + [r["non_2xx"]]
                for r in d["results"]
            ],
        )
    if (d := load("service")) is not None:
        table(
            ["files", "partitions", "manifests", "accepted in", "largest manifest", "commit", "RSS peak"],
            [
                [f"{r['files']:,}", f"{r['partitions']:,}", r["manifests"], f"{r['accept_s_total']:.3f} s"]
                + [f"{r['accept_s_max']:.3f} s", f"{r['commit_s']:.3f} s", f"{r['rss_mib_peak']:,.0f} MiB"]
                for r in d["results"]
            ],
        )
    if (d := load("partitions")) is not None:
        table(
            ["tables", "partitions", "files a round", "claim", "intake", "pass"],
            [
                [r["tables"], f"{r['partitions']:,}", f"{r['round_files']:,}"]
                + [f"{r[k] * 1000:.1f} ms" for k in ("claim_s", "intake_s", "pass_s")]
                for r in d["results"]
            ],
        )
    if (d := load("pipeline")) is not None:
        out += [
            f"{d['rate']:,} records/s for {d['seconds']} s; Connect flushes every {d['connect_offset_flush_ms'] / 1000:g} s.",
            "",
        ]
        table(
            ["system", "interval", "freshness p50", "p99", "CPU-s per million records", "of which service + sidecar"],
            [
                [r["system"], f"{r['interval_s']} s", f"{r['freshness_p50_s']} s", f"{r['freshness_p99_s']} s"]
                + [r["cpu_s_per_million"], r.get("marginal_cpu_s_per_million", "–")]
                for r in d["results"]
            ],
        )
    if (d := load("iceberg-peer")) is not None:
        out += [f"{d['rate']:,} records/s for {d['seconds']} s; Iceberg tables on one REST catalog each.", ""]
        table(
            ["system", "interval", "freshness p50", "p99", "CPU-s per million records"]
            + ["files per snapshot", "mean file", "S3 writes per million records"],
            [
                [r["system"], f"{r['interval_s']} s", f"{r['freshness_p50_s']} s", f"{r['freshness_p99_s']} s"]
                + [r["cpu_s_per_million"], r["files_per_snapshot"], f"{r['mean_file_kb']} KB"]
                + [f"{r['s3_writes_per_million']:,}"]
                for r in d["results"]
            ],
        )
    if (d := load("iceberg-peer-long")) is not None:
        out += [f"Side by side, {d['rate']:,} records/s for {d['seconds']} s at a {d['interval_s']} s interval.", ""]
        table(
            ["system", "live data files", "median file", "full scan", "one-minute range (files planned)"]
            + ["CPU-s per million records (without the catalog)", "freshness p50 / p99", "S3 writes per million"],
            [
                [r["system"], r["table"]["data_files"], f"{r['table'].get('median_kib')} KiB"]
                + [f"{r['full_scan_s']} s", f"{r['minute_range_s']} s ({r['table']['minute_range_files_planned']})"]
                + [f"{r['cpu_s_per_million']} ({r['cpu_s_per_million_without_catalog']})"]
                + [f"{r['freshness_p50_s']} / {r['freshness_p99_s']} s", f"{r['s3_writes_per_million']:,}"]
                for r in d["results"]
            ],
        )
    if (d := load("adopt")) is not None:
        steady = " / ".join(f"{d['steady'][t]['listing_ms_per_round']:.1f} ms" for t in ("adopt", "fresh"))
        table(
            ["archive", "caught up", "files/s (sustained)", "CPU per file: Lakegate / S3 server"]
            + ["rounds (largest)", "service peak RSS", "sidecar peak RSS"]
            + ["steady listing per round: archive / no archive", "a full listing of the archive"],
            [
                [f"{d['files']:,} files, {d['partitions']} partitions ({d['store']})", f"{d['caught_up_s']:.0f} s"]
                + [f"{d['files_per_s']:,} ({d.get('sustained_files_per_s')})"]
                + [f"{d.get('lakegate_cpu_ms_per_file')} / {d.get('store_cpu_ms_per_file')} ms"]
                + [f"{d['rounds']} ({d['largest_round_files']:,})"]
                + [f"{d['service_peak_rss_mib']:,} MiB", f"{d['sidecar_peak_rss_mib']:,} MiB"]
                + [f"{steady} ({d['steady_archive_over_fresh']}x)"]
                + [f"{d['full_listing_s']:.2f} s ({d['full_listing_keys']:,} keys)"]
            ],
        )
    return "\n".join(out)


def plot(part: str, data: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    if part == "commit":
        rows = data["results"]
        n = [r["files"] for r in rows]
        for key, label in (
            ("lakegate_read_ahead_s", "Lakegate (footers read ahead)"),
            ("lakegate_cold_s", "Lakegate (cold)"),
            ("spark_rewrite_s", "Spark rewrite (read.parquet → delta append)"),
        ):
            ax.plot(n, [r[key] for r in rows], marker="o", label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("files in the commit")
        ax.set_ylabel("seconds")
    elif part == "checkpoints":
        for mode in (m for m in CHECKPOINT_MODES if m in data):
            ax.plot(range(1, data["commits"] + 1), data[mode]["seconds"], label=f"checkpoints {mode}", linewidth=0.8)
        ax.set_yscale("log")  # inline's seconds beside the others' milliseconds
        ax.set_xlabel("commit")
        ax.set_ylabel("seconds")
    elif part == "history":
        rows = data["results"]
        ax.plot([r["version"] for r in rows], [r["p50_s"] for r in rows], marker="o", label="p50")
        ax.plot([r["version"] for r in rows], [r["p99_s"] for r in rows], marker="o", label="p99")
        ax.set_xscale("log")
        ax.set_xlabel("table version")
        ax.set_ylabel("seconds per 10-file commit")
    elif part in ("pipeline", "iceberg-peer"):
        rows = data["results"]
        systems = sorted({r["system"] for r in rows})
        intervals = sorted({r["interval_s"] for r in rows})
        width = 0.8 / (2 * len(systems))
        for i, system in enumerate(systems):
            for j, (key, hatch) in enumerate((("freshness_p50_s", ""), ("freshness_p99_s", "//"))):
                values = [
                    next((r[key] for r in rows if r["system"] == system and r["interval_s"] == iv), 0)
                    for iv in intervals
                ]
                xs = [k + (2 * i + j) * width for k in range(len(intervals))]
                ax.bar(xs, values, width, hatch=hatch, label=f"{system} {key.split('_')[1]}", color=f"C{i}")
        ax.set_xticks([k + 0.4 - width / 2 for k in range(len(intervals))], [f"{iv} s" for iv in intervals])
        ax.set_xlabel("commit interval / trigger")
        ax.set_ylabel("freshness, s")
    elif part == "iceberg-peer-long":
        for row in data["results"]:
            live = row["live_over_run"]
            start = live[0][0] if live else 0
            ax.step([(ms - start) / 60_000 for ms, _ in live], [n for _, n in live], where="post", label=row["system"])
        ax.set_xlabel("minutes")
        ax.set_ylabel("live data files")
    elif part == "http":
        rows = data["results"]
        labels = [str(r["clients"]) for r in rows]
        ax.bar(labels, [r["manifests_per_s"] for r in rows], color="tab:blue", label="manifests/s")
        ax.set_xlabel("concurrent clients")
        ax.set_ylabel("manifests/s")
        p99 = ax.twinx()
        p99.plot(labels, [r.get("p99_ms", 0) for r in rows], color="tab:red", marker="o", label="p99 ms")
        p99.set_ylabel("p99 latency, ms")
    elif part == "iceberg":
        rows = data["results"]
        for kind, style in (("parquet", "-"), ("jsonl", "--")):
            mine = [r for r in rows if r["format"] == kind]
            for key, color, label in (("delta_s", "C0", "Delta"), ("iceberg_s", "C1", "Iceberg")):
                ax.plot(
                    [r["files"] for r in mine],
                    [r[key] for r in mine],
                    style,
                    marker="o",
                    color=color,
                    label=f"{label}, {kind}",
                )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("files in the commit")
        ax.set_ylabel("seconds")
    elif part == "upsert":
        rows = data["results"]
        for kind, style in (("clustered", "-"), ("random", "--"), ("recent", ":")):
            mine = [r for r in rows if r["keys"] == kind]
            sizes = [r["changed_keys"] for r in mine]
            for key, marker, color, label in (
                ("lakegate_dv_s", "o", "C0", "Lakegate + DV"),
                ("lakegate_s", "^", "C2", "Lakegate copy-on-write"),
                ("delta_merge_dv_s", "s", "C1", "Delta MERGE + DV"),
            ):
                ax.plot(sizes, [r[key] for r in mine], style, marker=marker, color=color, label=f"{label}, {kind}")
        ax.set_xscale("log")
        ax.set_xlabel(f"changed keys per round (table of {data['table_rows']:,} rows)")
        ax.set_ylabel("seconds")
    else:
        plt.close(fig)
        return
    ax.set_title(f"lakegate bench: {part}")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
