"""What the Spark driver shows the rest of the host: static S3 credentials on no process's command
line (``ps`` shows those to every user), and the Spark UI listening on ``ui_host`` only."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import requests

from lakegate_stack import s3 as s3mod
from lakegate_stack.procfs import process_tree
from lakegate_stack.s3 import S3Server

LISTEN = "0A"  # TCP state in /proc/net/tcp*


def descendants(pid: int) -> set[int]:
    """Every process below ``pid``."""
    return set(process_tree([pid])) - {pid}


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def listening_addresses(port: int) -> set[str]:
    """The local addresses on which some socket of this host listens on TCP ``port``."""
    found: set[str] = set()
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, hex_port = fields[1].split(":")
            if fields[3] != LISTEN or int(hex_port, 16) != port:
                continue
            raw = bytes.fromhex(address)
            # /proc prints each 32-bit word in host (little-endian) order
            packed = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
            found.add(socket.inet_ntop(family, packed).removeprefix("::ffff:"))  # Java binds v4 as v4-mapped v6
    return found


def test_the_s3_secret_is_on_no_command_line_and_s3a_still_works(spark: Any, s3_server: S3Server) -> None:
    below = descendants(os.getpid())
    assert any(b"org.apache.spark.deploy.SparkSubmit" in cmdline(pid) for pid in below), "no driver JVM below us"
    leaking = [pid for pid in below if s3mod.SECRET_KEY.encode() in cmdline(pid)]
    assert not leaking, [cmdline(pid)[:300] for pid in leaking]

    s3_server.client().create_bucket(Bucket="lake-exposure")
    spark.range(10).write.format("delta").save("s3a://lake-exposure/t")
    assert spark.read.format("delta").load("s3a://lake-exposure/t").count() == 10

    ui = spark.sparkContext.uiWebUrl
    app_id = spark.sparkContext.applicationId
    environment = requests.get(f"{ui}/api/v1/applications/{app_id}/environment", timeout=30).text
    assert s3mod.SECRET_KEY not in environment


def test_the_spark_ui_listens_on_ui_host_only(spark: Any) -> None:
    ui = urlsplit(spark.sparkContext.uiWebUrl)  # its host is the name of 127.0.0.1 (localhost)
    assert ui.port is not None and listening_addresses(ui.port) == {"127.0.0.1"}
    assert requests.get(f"http://127.0.0.1:{ui.port}/api/v1/applications", timeout=30).status_code == 200
