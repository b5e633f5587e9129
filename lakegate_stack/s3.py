"""An S3-compatible server on loopback (moto's server mode, from PyPI), for the tests and demo.

Writers reach it with path-style addressing at :attr:`S3Server.endpoint` and any credentials;
:meth:`S3Server.client` gives a boto3 client already pointed at it.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import requests

from lakegate_stack.process import ManagedProcess, free_port

logger = logging.getLogger(__name__)

ACCESS_KEY = "lakegate"
SECRET_KEY = "lakegate-secret"
REGION = "us-east-1"


def s3_client(endpoint: str, config: Any = None) -> Any:
    """A boto3 S3 client for a local server at ``endpoint``, with the stack's credentials."""
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        config=config,
    )


class S3Server:
    """A moto S3 server process; owns ``workdir/s3.log``. Data lives in its memory only."""

    def __init__(self, workdir: Path, host: str = "127.0.0.1") -> None:
        self.workdir = workdir
        self.host = host
        self.port = free_port(host)
        self.process: ManagedProcess | None = None

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 60.0) -> S3Server:
        cmd = [sys.executable, "-m", "moto.server", "-H", self.host, "-p", str(self.port)]
        self.process = ManagedProcess("s3", cmd, self.workdir / "s3.log").start()
        self.process.wait_ready(
            lambda: requests.get(f"{self.endpoint}/", timeout=2).status_code == 200, timeout, "serving S3"
        )
        logger.info("s3 server ready at %s", self.endpoint)
        return self

    def stop(self) -> None:
        if self.process:
            self.process.stop()

    def client(self) -> Any:
        return s3_client(self.endpoint)

    def create_bucket(self, name: str) -> None:
        self.client().create_bucket(Bucket=name)
