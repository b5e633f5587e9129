"""Benchmark: ``/healthz`` latency of the real service while slow clients hold connections open.

Starts ``lakegate-service`` (by default without Spark: an empty jars directory makes its start-up
fail at once, so only the HTTP side runs; ``--spark`` lets Spark start meanwhile, from the jar
cache), times ``/healthz`` on fresh connections, then opens ``--connections`` slow clients (a
request header one line per ``--interval`` seconds, never finished; ``--body``: a whole header,
then the body a byte at a time), reopening those the server closes, and times ``/healthz`` again
for ``--seconds``. Prints a summary and writes JSON (default .lakegate/bench/slowclients.json).
Run through ``scripts/bench-slowclients``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from lakegate_bench.result import report, work_dir
from lakegate_stack.services import SIDECAR_TOKEN, ServiceProcess
from lakegate_stack.slowclients import SlowClients, healthz_latency, probe_service


def summary(latencies: list[float | None]) -> dict[str, Any]:
    """Milliseconds (p50, p95, max) of the answered probes, and how many failed or timed out."""
    ok = sorted(t * 1000 for t in latencies if t is not None)
    if not ok:
        return {"probes": len(latencies), "failed": len(latencies)}
    return {
        "probes": len(latencies),
        "failed": len(latencies) - len(ok),
        "p50_ms": round(statistics.median(ok), 1),
        "p95_ms": round(ok[min(len(ok) - 1, int(0.95 * len(ok)))], 1),
        "max_ms": round(ok[-1], 1),
    }


def effective_server(svc: ServiceProcess) -> dict[str, Any]:
    """The service's ``server:`` section as it runs (``lakegate-service --check-config``)."""
    script = Path(sys.executable).parent / "lakegate-service"
    out = subprocess.run(
        [str(script), "--config", str(svc.config_path), "--check-config"], capture_output=True, text=True, timeout=60
    )
    return dict(json.loads(out.stdout)["server"]) if out.returncode == 0 else {"error": out.stderr.strip()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/bench-slowclients", description=__doc__.splitlines()[0] if __doc__ else None
    )
    parser.add_argument("--connections", type=int, default=50, help="slow connections held open (default 50)")
    parser.add_argument("--seconds", type=float, default=30, help="how long /healthz is timed under load")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between a slow client's sends")
    parser.add_argument("--body", action="store_true", help="slow bodies (after a whole header), not slow headers")
    parser.add_argument("--probe-timeout", type=float, default=5.0, help="a /healthz slower than this failed")
    parser.add_argument("--threads", type=int, default=8, help="server.threads (default 8, the service's)")
    parser.add_argument("--read-timeout", type=float, help="server.read_timeout_seconds (default: the service's)")
    parser.add_argument("--spark", action="store_true", help="let Spark start meanwhile (needs the jar cache)")
    parser.add_argument(
        "--ready", action="store_true", help="with --spark: wait until the service is ready before the slow clients"
    )
    parser.add_argument("--out", type=Path, default=Path(".lakegate/bench/slowclients.json"))
    args = parser.parse_args(argv)

    work = work_dir("lakegate-bench-slowclients-")
    server: dict[str, Any] = {"threads": args.threads}
    if args.read_timeout is not None:
        server["read_timeout_seconds"] = args.read_timeout
    svc = probe_service(work, server, with_spark=args.spark)
    svc.spawn()
    try:
        svc.wait_healthy()
        settings = effective_server(svc)
        spark_start = None
        if args.spark and args.ready:
            t0 = time.monotonic()
            svc.wait_ready(timeout=300)
            spark_start = round(time.monotonic() - t0, 1)
        baseline = [healthz_latency(svc.url, args.probe_timeout) for _ in range(20)]
        print(f"baseline /healthz (no slow clients): {summary(baseline)}", flush=True)
        loaded: list[float | None] = []
        with SlowClients(
            "127.0.0.1", svc.port, args.connections, args.interval, body=args.body, token=SIDECAR_TOKEN
        ) as slow:
            started = time.monotonic()
            while time.monotonic() - started < args.seconds:
                slow.wait_round(timeout=args.interval + 30)
                for _ in range(2):
                    loaded.append(healthz_latency(svc.url, args.probe_timeout))
                s = summary(loaded[-2:])
                print(
                    f"t={time.monotonic() - started:5.1f}s round {slow.rounds}: /healthz {s}, "
                    f"slow closed by server {slow.closed_by_server}",
                    flush=True,
                )
            elapsed = time.monotonic() - started
        ready = svc.call("GET", "/readyz").json()
        alive = svc.process.running()
    finally:
        svc.stop()
    result = {
        "benchmark": "slowclients",
        "connections": args.connections,
        "slow_part": "body" if args.body else "header",
        "interval_seconds": args.interval,
        "seconds": round(elapsed, 1),
        "spark": args.spark,
        "waited_for_ready_seconds": spark_start,
        "server": settings,
        "baseline": summary(baseline),
        "with_slow_clients": summary(loaded),
        "slow_connections_opened": slow.opened,
        "slow_connections_closed_by_server": slow.closed_by_server,
        "server_answers_to_slow_clients": dict(slow.answers),
        "readyz_status": ready.get("status"),
        "service_alive": alive,
    }
    report(result, args.out)
    return 0 if result["with_slow_clients"]["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
