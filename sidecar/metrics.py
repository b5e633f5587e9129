"""The sidecar's Prometheus metrics and its small HTTP endpoint (``/healthz``, ``/metrics``).

Scraped by Prometheus and probed by Kubernetes; updated by the loop.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest


class SidecarMetrics:
    """One registry per loop; ``healthy`` is true while rounds keep succeeding."""

    def __init__(self, stale_after: float) -> None:
        self.registry = CollectorRegistry()
        self.files = Counter("lakegate_sidecar_files_reported", "Files sent to the service", registry=self.registry)
        self.receipts = Counter(
            "lakegate_sidecar_file_receipts",
            "The service's verdicts on sent files, by status (duplicate: it held the file already)",
            ["status"],
            registry=self.registry,
        )
        self.manifests = Counter(
            "lakegate_sidecar_manifests_sent", "Manifests sent, by result", ["result"], registry=self.registry
        )
        self.errors = Counter("lakegate_sidecar_errors", "Failed rounds, by source", ["kind"], registry=self.registry)
        self.rounds = Counter("lakegate_sidecar_rounds", "Completed rounds", registry=self.registry)
        self.owned = Gauge(
            "lakegate_sidecar_owned_partitions", "Partitions this worker's tasks own", registry=self.registry
        )
        self.lag = Gauge(
            "lakegate_sidecar_lag_offsets",
            "Connect's committed offset minus the table's",
            ["topic", "partition"],
            registry=self.registry,
        )
        self.listing_seconds = Counter(
            "lakegate_sidecar_listing_seconds",
            "Seconds spent listing the sink's files, by topic (a round lists a topic whole or its partitions)",
            ["topic"],
            registry=self.registry,
        )
        self.listings = Counter(
            "lakegate_sidecar_listing_requests",
            "Listings started (one per topic listed whole, one per partition listed from its offset)",
            ["topic"],
            registry=self.registry,
        )
        self.stale_after = stale_after
        self.last_success = time.monotonic()

    def healthy(self) -> bool:
        return time.monotonic() - self.last_success < self.stale_after


def serve(metrics: SidecarMetrics, host: str, port: int) -> ThreadingHTTPServer:
    """Start the endpoint in a daemon thread; returns the server (``shutdown()`` stops it)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            if self.path == "/metrics":
                body, status, ctype = generate_latest(metrics.registry), 200, "text/plain; version=0.0.4"
            elif self.path == "/healthz":
                ok = metrics.healthy()
                body, status, ctype = (b"ok\n" if ok else b"stale\n"), (200 if ok else 503), "text/plain"
            else:
                body, status, ctype = b"not found\n", 404, "text/plain"
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, name="sidecar-http", daemon=True).start()
    return server
