"""HTTP client of the commit service, used by the sidecar loop.

Speaks :mod:`lakegate_core.protocol` and :mod:`lakegate_core.status` (the shared wire model). Every call retries
with exponential backoff and full jitter on connection errors, timeouts, 409 and 5xx, up to
``attempts``; 4xx other than 409 are not retried (the request itself is wrong).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import Any

import requests

from lakegate_core.doctor import DoctorReport, DoctorRequest
from lakegate_core.protocol import LeaseRequest, LeaseResponse, Manifest, ManifestReceipt
from lakegate_core.status import TableList
from lakegate_core.types import PartitionOffsets
from sidecar.errors import ServiceError, ServiceRefusedError
from sidecar.sessions import session_for

logger = logging.getLogger(__name__)

RETRY_STATUS = {409, 429, 500, 502, 503, 504}


class ServiceClient:
    """Calls ``GET /v1/tables``, ``POST /v1/leases``, ``POST /v1/manifests`` and ``POST /v1/doctor`` with a bearer token."""

    def __init__(
        self,
        url: str,
        token: str | None,
        session: requests.Session | None = None,
        *,
        attempts: int = 5,
        base_delay: float = 0.5,
        max_delay: float = 30.0,
        timeout: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.url = url.rstrip("/")
        self.http = session or session_for(self.url)
        if token:
            self.http.headers["Authorization"] = f"Bearer {token}"
            self.http.auth = None  # the token is the login: a .netrc entry for the host does not replace it
        self.attempts = attempts
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.timeout = timeout
        self.sleep = sleep

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        last: ServiceError | None = None
        for attempt in range(self.attempts):
            if attempt:
                delay = random.uniform(0, min(self.max_delay, self.base_delay * 2**attempt))
                logger.info("retrying %s %s in %.1fs (%s)", method, path, delay, last)
                self.sleep(delay)
            try:
                resp = self.http.request(method, f"{self.url}{path}", timeout=self.timeout, **kwargs)
            except requests.RequestException as exc:
                last = ServiceError(f"{method} {path}: {exc}")
                continue
            if resp.status_code < 400:
                return resp.json()
            message = f"{method} {path}: HTTP {resp.status_code}: {resp.text[:300]}"
            if resp.status_code not in RETRY_STATUS:
                raise ServiceRefusedError(message, remote_status=resp.status_code)
            last = ServiceError(message, remote_status=resp.status_code)
        assert last is not None
        raise last

    def table_offsets(self) -> PartitionOffsets:
        """Next offsets committed in every table, merged (a topic routes to one table)."""
        return TableList.offsets_from_dict(self._call("GET", "/v1/tables"))

    def claim(self, request: LeaseRequest) -> LeaseResponse:
        """Lease partitions: whether fencing is on, and a grant or refusal per partition."""
        return LeaseResponse.from_dict(self._call("POST", "/v1/leases", json=request.to_dict()))

    def doctor(self, request: DoctorRequest) -> DoctorReport:
        """The doctor's report on this sidecar's connectors (``POST /v1/doctor``), which the service keeps."""
        return DoctorReport.from_json(self._call("POST", "/v1/doctor", json=request.to_dict()))

    def send(self, manifest: Manifest) -> ManifestReceipt:
        return ManifestReceipt.from_dict(self._call("POST", "/v1/manifests", json=manifest.to_dict()))
