"""A real S3-compatible server on loopback (SeaweedFS's ``weed server -s3``), for benchmarks where concurrency matters.

:class:`lakegate_stack.s3.S3Server` (moto) answers one request at a time, so its timings say
nothing about a real store: a listing or a batch of Parquet footer reads that overlaps requests
looks no faster on it than one that does not. :class:`SeaweedS3Server` runs SeaweedFS (master,
volume server, filer and S3 gateway in one ``weed`` process) with its data under the work dir and
serves requests concurrently. It has the same interface as ``S3Server`` and the same credentials
(:data:`lakegate_stack.s3.ACCESS_KEY` / ``SECRET_KEY``, the only identity; anonymous requests are
refused). The tests keep moto; the binary is not installed by default: ``scripts/install-seaweedfs``
builds it into ``~/.cache/lakegate/bin``.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from pathlib import Path
from typing import Any

from lakegate_core.cache import default_cache_dir
from lakegate_stack.errors import StackError
from lakegate_stack.process import ManagedProcess, free_port
from lakegate_stack.s3 import ACCESS_KEY, SECRET_KEY, s3_client

logger = logging.getLogger(__name__)

ACTIONS = ["Admin", "Read", "Write", "List", "Tagging"]
COMPONENTS = ("s3", "master", "volume", "filer")
PROBE_BUCKET = "lakegate-write-probe"  # made and removed again by start()


def weed_binary() -> Path:
    """The ``weed`` that ``scripts/install-seaweedfs`` installed (else one on ``PATH``)."""
    installed = default_cache_dir() / "bin" / "weed"
    if installed.is_file():
        return installed
    on_path = shutil.which("weed")
    if on_path:
        return Path(on_path)
    raise StackError(
        f"SeaweedFS's weed is not installed (looked for {installed} and on PATH): "
        "run scripts/install-seaweedfs (builds it from its Go module; needs Go >= 1.26)"
    )


class SeaweedS3Server:
    """A SeaweedFS process serving S3; owns ``workdir/seaweedfs.log`` and ``workdir/seaweedfs/``."""

    def __init__(self, workdir: Path, host: str = "127.0.0.1") -> None:
        self.workdir = workdir
        self.host = host
        # Each component's HTTP and gRPC ports, all set explicitly: left alone, SeaweedFS takes
        # port + 10000 for gRPC, which nothing has checked is free.
        self.ports = {name: free_port(host) for name in COMPONENTS}
        self.grpc_ports = {name: free_port(host) for name in COMPONENTS}
        self.port = self.ports["s3"]
        self.process: ManagedProcess | None = None

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def data_dir(self) -> Path:
        return self.workdir / "seaweedfs" / "data"

    @property
    def log_path(self) -> Path:
        return self.workdir / "seaweedfs.log"

    def write_identities(self) -> Path:
        """The ``-s3.config`` file: one identity with the stack's keys and every S3 action."""
        path = self.workdir / "seaweedfs" / "s3-identities.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        identity = {
            "name": "lakegate",
            "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
            "actions": ACTIONS,
        }
        path.write_text(json.dumps({"identities": [identity]}, indent=2) + "\n")
        return path

    def command(self, binary: Path, identities: Path) -> list[str]:
        flags = {
            "ip": self.host,
            "ip.bind": self.host,
            "dir": str(self.data_dir),
            "s3": "true",
            "s3.config": str(identities),
            "s3.port.iceberg": "0",  # the Iceberg REST catalog and Lance listeners: off
            "s3.port.lance": "0",
            "master.telemetry": "false",
            "master.volumeSizeLimitMB": "128",  # with volume.max=0: as many volumes as the disk holds (as `weed mini`)
            "volume.max": "0",
            "volume.preStopSeconds": "0",  # stop at SIGTERM, not 10 s later
            **{f"{name}.port": str(port) for name, port in self.ports.items()},
            **{f"{name}.port.grpc": str(port) for name, port in self.grpc_ports.items()},
        }
        return [str(binary), "server", *(f"-{k}={v}" for k, v in flags.items())]

    def start(self, timeout: float = 60.0) -> SeaweedS3Server:
        """Start ``weed server`` and wait until it lists buckets, then until it takes a write.

        A fresh SeaweedFS answers S3 within ~3 s, but holds its first write ~9 s more (the new
        master defers volume allocation, the filer joins the lock ring); the write probe (a
        bucket of its own, removed again) takes that wait here, not in the first timed request."""
        binary = weed_binary()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cmd = self.command(binary, self.write_identities())
        self.process = ManagedProcess("seaweedfs", cmd, self.log_path, cwd=self.data_dir.parent).start()
        deadline = time.monotonic() + timeout
        probe = self.client(connect_timeout=2, read_timeout=5, max_attempts=1)
        self.process.wait_ready(lambda: probe.list_buckets() is not None, timeout, "serving S3")
        writer = self.client(connect_timeout=2, read_timeout=max(5.0, deadline - time.monotonic()), max_attempts=1)
        self.process.wait_ready(
            lambda: self._write_probe(writer), max(1.0, deadline - time.monotonic()), "taking writes"
        )
        logger.info("seaweedfs s3 server ready at %s", self.endpoint)
        return self

    @staticmethod
    def _write_probe(client: Any) -> bool:
        buckets = {b["Name"] for b in client.list_buckets().get("Buckets", [])}
        if PROBE_BUCKET not in buckets:
            client.create_bucket(Bucket=PROBE_BUCKET)
        client.put_object(Bucket=PROBE_BUCKET, Key="probe", Body=b"ok")
        client.delete_object(Bucket=PROBE_BUCKET, Key="probe")
        client.delete_bucket(Bucket=PROBE_BUCKET)
        return True

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM, SIGKILL after ``timeout``. A clean stop takes ~15 s: the filer retries its last
        metadata-log flush for that long after the volume server in the same process has stopped."""
        if self.process:
            self.process.stop(timeout)
        for path in self.socket_paths():
            path.unlink(missing_ok=True)

    def socket_paths(self) -> list[Path]:
        """The Unix sockets SeaweedFS opens beside its TCP ports (in /tmp, named by port)."""
        grpc = [Path(f"/tmp/seaweedfs-{name}-grpc-{port}.sock") for name, port in self.grpc_ports.items()]
        local = [Path(f"/tmp/seaweedfs-{name}-{self.ports[name]}.sock") for name in ("filer", "s3")]
        return grpc + local

    def client(self, *, connect_timeout: float = 10, read_timeout: float = 60, max_attempts: int = 3) -> Any:
        """A boto3 client with path-style addressing (as Hadoop's s3a) and room for concurrent requests."""
        from botocore.config import Config

        config = Config(
            s3={"addressing_style": "path"},
            max_pool_connections=64,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            retries={"max_attempts": max_attempts, "mode": "standard"},
        )
        return s3_client(self.endpoint, config)

    def create_bucket(self, name: str) -> None:
        self.client().create_bucket(Bucket=name)
