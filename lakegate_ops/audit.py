"""``lakegate-audit``: audit tables through the commit service and say whether exactly once holds.

Asks ``GET /v1/tables/{table}/audit`` of each table named (every table when none is), prints a
summary per table (``--json``: the reports) and exits 0 when no finding is a breach, 1 when one
is, 2 when an audit could not run (the service unreachable, a table unknown, a bad argument).
"""

from __future__ import annotations

import argparse
import json
import sys
from urllib.parse import quote

from lakegate_core.audit import AuditReport, Severity
from lakegate_ops.api import ApiCallError, add_service_arguments, call, service_session

EXIT_OK, EXIT_BREACH, EXIT_ERROR = 0, 1, 2
TIMEOUT_SECONDS = 900.0  # an audit reads the whole table


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lakegate-audit",
        description="Audit Lakegate tables: each partition's committed ranges from the table's history, "
        "the rows against them, the table against Kafka's offsets, and a seeded sample of records read "
        "back from Kafka compared field by field with the table's rows. Exit 0: no breach; 1: a breach; "
        "2: an audit could not run.",
        epilog="See docs/operations.md for what each finding means and how to fix it.",
    )
    parser.add_argument("tables", nargs="*", metavar="TABLE", help="tables to audit (default: every table)")
    add_service_arguments(parser)
    parser.add_argument("--sample", type=int, default=100, help="records read back from Kafka per table (default 100)")
    parser.add_argument("--seed", type=int, default=0, help="the sample's seed: the same seed picks the same records")
    parser.add_argument("--json", action="store_true", help="print the reports as JSON lines")
    parser.add_argument(
        "--timeout", type=float, default=TIMEOUT_SECONDS, help=f"seconds per table (default {TIMEOUT_SECONDS:.0f})"
    )
    return parser


def summary(report: AuditReport) -> str:
    """A report for a person: the verdict, what was looked at, and each finding."""
    c = report.counts
    lines = [
        f"{report.table} ({report.format}, version {report.version}): "
        f"{'OK' if report.ok else 'BREACH'} in {report.duration_ms / 1000:.1f} s",
        f"  {c.commits} commits, {c.offsets} committed offsets, {c.rows} rows in {c.files} files; "
        f"{c.matched} of {c.sampled} records read back from Kafka equal (seed {report.seed})",
    ]
    order = [Severity.BREACH, Severity.WARNING, Severity.GAP, Severity.INFO]
    for f in sorted(report.findings, key=lambda f: order.index(f.severity)):
        lines.append(f"  {f.severity.value.upper():7} {f.kind.value}: {f.message}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.sample < 0:
        print("lakegate-audit: --sample must be 0 or more", file=sys.stderr)
        return EXIT_ERROR
    base = args.service.rstrip("/")
    session = service_session(args.token)
    worst = EXIT_OK
    try:
        tables = args.tables or [t["table"] for t in call(session, "GET", f"{base}/v1/tables", 30)["tables"]]
    except (ApiCallError, KeyError, TypeError) as exc:
        print(f"lakegate-audit: {exc}", file=sys.stderr)
        return EXIT_ERROR
    for i, table in enumerate(tables, 1):
        if not args.json:
            print(f"[{i}/{len(tables)}] auditing {table} ...", file=sys.stderr, flush=True)
        try:
            raw = call(
                session,
                "GET",
                f"{base}/v1/tables/{quote(table, safe='')}/audit",
                args.timeout,
                params={"sample": args.sample, "seed": args.seed},
            )
            report = AuditReport.from_json(raw)
        except (ApiCallError, KeyError, ValueError, TypeError) as exc:
            print(f"lakegate-audit: {table}: {exc}", file=sys.stderr)
            worst = EXIT_ERROR
            continue
        print(json.dumps(raw, sort_keys=True) if args.json else summary(report), flush=True)
        if not report.ok and worst == EXIT_OK:
            worst = EXIT_BREACH
    return worst


if __name__ == "__main__":
    sys.exit(main())
