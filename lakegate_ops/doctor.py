"""``lakegate-doctor``: is every connector feeding a Lakegate table set up so that exactly once can hold?

Without ``--connect`` it asks ``GET /v1/doctor``: the connectors the sidecars reported at start,
checked now. With ``--connect URL`` (repeatable) it reads the connectors' configs and states from
those Connect workers' REST API itself (only the keys the doctor reads leave this process) and asks
``POST /v1/doctor`` (a ``sidecar`` or ``admin`` token) — before any sidecar runs, say. Prints a
summary per connector (``--json``: the report) and exits 0; with ``--require exactly-once``, 1 when
a finding is blocking; 2 when the doctor could not run (service or Connect unreachable, nothing to check).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import requests

from lakegate_core.doctor import ConnectorSpec, DoctorReport, DoctorRequest, DoctorSeverity, Listing
from lakegate_ops.api import ApiCallError, add_service_arguments, call, service_session

EXIT_OK, EXIT_BLOCKED, EXIT_ERROR = 0, 1, 2
TIMEOUT_SECONDS = 120.0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lakegate-doctor",
        description="Check every Kafka Connect sink feeding Lakegate tables against what exactly once needs: "
        "file naming, format, the offset field, dropped records, file cadence, retention, transactions, "
        "placement, routing and offsets gone backwards. Exit 0; with --require exactly-once, 1 on a blocking "
        "finding; 2 when the doctor could not run.",
        epilog="See docs/operations.md for what each finding means and how to fix it.",
    )
    add_service_arguments(parser)
    parser.add_argument(
        "--connect",
        action="append",
        default=[],
        metavar="URL",
        help="read the connectors from this Connect REST API (repeatable; needs a sidecar or admin token); "
        "default: the connectors the sidecars reported",
    )
    parser.add_argument(
        "--connector", action="append", default=[], metavar="NAME", help="only these connectors (repeatable)"
    )
    parser.add_argument(
        "--naming", default="aiven", help="with --connect: how the sidecars read file names (aiven, confluent, a regex)"
    )
    parser.add_argument("--bucket", help="with --connect: the bucket the sidecars list")
    parser.add_argument(
        "--prefix", help="with --connect: the prefix the sidecars list under (default: each sink's own prefix)"
    )
    parser.add_argument(
        "--require",
        choices=["exactly-once"],
        help="exit 1 when a finding is blocking (exactly once cannot hold as configured)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--timeout", type=float, default=TIMEOUT_SECONDS, help="seconds per call (default 120)")
    return parser


def connect_specs(url: str, only: list[str], timeout: float) -> list[ConnectorSpec]:
    """Every connector of one Connect cluster (or those named ``only``), read with one call."""
    raw = call(
        requests.Session(),
        "GET",
        f"{url.rstrip('/')}/connectors",
        timeout,
        params=[("expand", "info"), ("expand", "status")],
    )
    if not isinstance(raw, dict):
        raise ApiCallError(f"{url}/connectors?expand=info&expand=status answered no object")
    specs = [
        ConnectorSpec.from_connect(name, (entry.get("info") or {}).get("config") or {}, entry.get("status") or {})
        for name, entry in sorted(raw.items())
        if not only or name in only
    ]
    return specs + [ConnectorSpec.from_connect(n, {}, None) for n in only if n not in raw]


def summary(report: DoctorReport) -> str:
    """The report for a person: per connector, its tables, its findings worst first, what passed."""
    order = [DoctorSeverity.BLOCKING, DoctorSeverity.WARNING, DoctorSeverity.INFO]
    lines = []
    for c in report.connectors:
        found = sorted((f for f in report.findings if f.connector == c.name), key=lambda f: order.index(f.severity))
        blocked = any(f.severity is DoctorSeverity.BLOCKING for f in found)
        lines.append(
            f"{c.name} -> {', '.join(c.tables) or '(no table)'}: {'BLOCKED' if blocked else 'OK'} "
            f"({c.source}; topics {', '.join(c.topics) or '-'})"
        )
        for f in found:
            lines.append(f"  {f.severity.value.upper():8} {f.check.value}: {f.message}")
            lines.append(f"           why: {f.why}")
            if f.key or f.fix:
                lines.append(f"           change {f.key or '-'}: {f.fix or '-'}")
        lines.append(f"  passed: {', '.join(p.value for p in c.passed) or '-'}")
    verdict = "exactly once can hold" if report.ok else f"{len(report.blocking())} blocking finding(s)"
    lines.append(f"{len(report.connectors)} connector(s) checked in {report.duration_ms / 1000:.1f} s: {verdict}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    base = args.service.rstrip("/")
    session = service_session(args.token)
    try:
        if args.connect:
            specs: list[ConnectorSpec] = []
            for url in args.connect:
                print(f"reading connectors from {url} ...", file=sys.stderr, flush=True)
                specs.extend(connect_specs(url, args.connector, args.timeout))
            if not specs:
                print("lakegate-doctor: no connector to check on " + ", ".join(args.connect), file=sys.stderr)
                return EXIT_ERROR
            body: dict[str, Any] = DoctorRequest(tuple(specs), Listing(args.naming, args.bucket, args.prefix)).to_dict()
            raw = call(session, "POST", f"{base}/v1/doctor", args.timeout, json=body)
        else:
            raw = call(
                session, "GET", f"{base}/v1/doctor", args.timeout, params=[("connector", c) for c in args.connector]
            )
        report = DoctorReport.from_json(raw)
    except (ApiCallError, KeyError, ValueError, TypeError) as exc:
        print(f"lakegate-doctor: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if not report.connectors:
        print(
            "lakegate-doctor: no connector to check: no sidecar has reported one; use --connect URL",
            file=sys.stderr,
        )
        return EXIT_ERROR
    print(json.dumps(raw, sort_keys=True) if args.json else summary(report), flush=True)
    return EXIT_BLOCKED if args.require and not report.ok else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
