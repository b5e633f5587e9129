"""Catalog registration through Spark's embedded Hive metastore (Derby), all real.

The service runs with ``spark.sql.catalogImplementation=hive`` and a table with ``catalog.name``;
after its first commit the table is registered. A second, separate Spark process then opens the
same metastore and finds the table by name, with every row: what a Hive metastore (or Unity/Glue
configured through ``spark.conf``) shows to other engines.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.service_helpers import ServiceProcess, manifest, write_parquet

READ_BACK = """
import sys
from pathlib import Path
from commit_service.spark.session import SparkSettings, create_session
spark = create_session(SparkSettings(master="local[1]", ui_enabled=False, driver_memory="1g",
                                     local_dir=Path(sys.argv[1]), conf={"spark.sql.catalogImplementation": "hive"}))
print(spark.table(sys.argv[2]).count())
"""


def test_a_table_is_registered_in_the_embedded_hive_metastore(tmp_path: Path) -> None:
    root = tmp_path / "lake" / "orders"
    files = [write_parquet(root / "data" / f"orders-0-{s}", "orders", 0, s, 50) for s in (0, 50)]
    name = "lakegate_it.orders"
    table = {
        "name": "orders",
        "path": str(root),
        "topics": ["orders"],
        "catalog": {"name": name},
        "commit": {"interval_seconds": 3600},
    }
    svc = ServiceProcess(
        tmp_path, [table], [f"file://{tmp_path}/lake/"], spark_conf={"spark.sql.catalogImplementation": "hive"}
    ).start()
    try:
        assert svc.call("POST", "/v1/manifests", json=manifest("m1", files)).status_code == 202
        assert svc.commit_now("orders")["version"] == 0
    finally:
        svc.stop()  # releases the embedded metastore (Derby allows one process at a time)
    out = subprocess.run(
        [sys.executable, "-c", READ_BACK, str(tmp_path / "service-spark"), name],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    assert out.stdout.strip().splitlines()[-1] == "100"
