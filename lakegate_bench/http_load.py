"""The ``http`` part of ``python -m lakegate_bench bench``: the real service under ``wrk``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from lakegate_bench.commit_path import TOPIC

WRK_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0, "m": 60_000.0}


def wrk_figures(output: str) -> dict[str, Any]:
    """Requests/s, latency percentiles (ms) and non-2xx answers from ``wrk --latency`` output."""
    import re

    def ms(text: str) -> float:
        m = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text)
        assert m, text
        return round(float(m.group(1)) * WRK_UNITS[m.group(2)], 2)

    out: dict[str, Any] = {}
    for pct, value in re.findall(r"^\s+(50|75|90|99)%\s+(\S+)$", output, re.M):
        out[f"p{pct}_ms"] = ms(value)
    rate = re.search(r"^Requests/sec:\s+([\d.]+)", output, re.M)
    total = re.search(r"^\s+(\d+) requests in", output, re.M)
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    errors = re.search(r"Socket errors: (.*)$", output, re.M)
    assert rate and total, output
    out.update(
        manifests_per_s=round(float(rate.group(1)), 1),
        requests=int(total.group(1)),
        non_2xx=int(bad.group(1)) if bad else 0,
        socket_errors=errors.group(1) if errors else None,
    )
    return out


def part_http(work: Path, clients: list[int], seconds: int) -> dict[str, Any]:
    """The real service under wrk (see the module docstring)."""
    import shutil
    import subprocess

    from lakegate_stack.services import SIDECAR_TOKEN, ServiceProcess

    wrk = shutil.which("wrk")
    if wrk is None:
        raise SystemExit("the http part needs wrk on PATH (scripts/bench installs it from Debian)")
    root = work / "http-table"
    table = {
        "name": "bench",
        "path": f"file://{root}",
        "topics": [TOPIC],
        "commit": {"interval_seconds": 3600, "max_files": 1_000_000, "max_pending_files": 10_000_000},
    }
    service = ServiceProcess(work / "http", [table], [f"file://{root}/"], server={"threads": 8})
    print("starting the service (gunicorn, then Spark) ...", flush=True)
    service.start()
    service.spark_ui()  # Spark up and idle: the figures are the HTTP side's
    rows = []
    try:
        for run, n in enumerate(clients):
            env = {
                **os.environ,
                "LAKEGATE_BENCH_TOKEN": SIDECAR_TOKEN,
                "LAKEGATE_BENCH_ROOT": f"file://{root}",
                "LAKEGATE_BENCH_FIRST_PARTITION": str(run * 100),
            }
            cmd = [
                wrk,
                "-t2",
                f"-c{n}",
                f"-d{seconds}s",
                "--latency",
                "-s",
                str(Path(__file__).parent / "manifest.lua"),
                service.url,
            ]
            result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=seconds + 60, check=True)
            row = {"clients": n, "seconds": seconds, **wrk_figures(result.stdout)}
            rows.append(row)
            print(
                f"{n:>3} clients: {row['manifests_per_s']:>8.1f} manifests/s  p50 {row.get('p50_ms')} ms  "
                f"p90 {row.get('p90_ms')} ms  p99 {row.get('p99_ms')} ms  non-2xx {row['non_2xx']}",
                flush=True,
            )
        pending = service.call("GET", "/v1/tables/bench").json()["pending_files"]
    finally:
        service.stop()
    answered = sum(r["requests"] - r["non_2xx"] for r in rows)
    # every answered manifest was a new file, buffered (wrk may stop with a request in flight)
    assert answered <= pending <= answered + sum(clients), (answered, pending)
    return {"results": rows, "pending_files_after": pending}
