"""Lakegate's Delta log store and local file system for file: tables (delta-log-store/), in the
service's real Spark session.

``LocalListFromLogStore`` is Delta's ``LocalLogStore`` whose listing stats only the entries from
its start name on; what it lists must be exactly what Delta's own store lists, for every start.
``NioPermissionsLocalFileSystem`` is Hadoop's local file system that sets permissions without a
``chmod`` child process; the permissions must be exactly Hadoop's own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from py4j.protocol import Py4JJavaError

from commit_service.spark.session import LOCAL_FILE_SYSTEM, LOCAL_LOG_STORE
from lakegate_stack.procfs import children_cpu_seconds

pytestmark = pytest.mark.integration


def listing(store: Any, spark: Any, log: Path, start: str) -> list[tuple[str, int, bool]]:
    """(name, length, is a folder) of what ``store.listFrom`` returns for ``log/start``, in order."""
    path = spark._jvm.org.apache.hadoop.fs.Path(f"file:{log}/{start}")
    found = store.listFrom(path, spark._jsc.hadoopConfiguration())
    out = []
    while found.hasNext():
        status = found.next()
        out.append((status.getPath().getName(), status.getLen(), status.isDirectory()))
    return out


def test_the_service_s_tables_use_the_store_and_it_lists_what_delta_s_lists(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    for _ in range(12):  # past Delta's checkpoint at v10, with Hadoop's .crc beside each log file
        spark.range(3).write.format("delta").mode("append").save(str(root))
    jvm = spark._jvm
    delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, str(root))
    in_use = delta_log.store().getDelegate(delta_log.logPath()).logStoreImpl()
    assert in_use.getClass().getName() == LOCAL_LOG_STORE

    log = root / "_delta_log"
    (log / "00000000000000000011.json:copy").write_text("{}\n")  # a name Hadoop must not read as a URI
    (log / "zz-folder").mkdir()  # a folder sorts in like a file
    conf = spark._jsc.hadoopConfiguration()
    ours = jvm.io.lakegate.delta.LocalListFromLogStore(conf)
    deltas = jvm.io.delta.storage.LocalLogStore(conf)
    starts = [
        f"{0:020d}.json",
        f"{5:020d}.json",
        f"{10:020d}.checkpoint.parquet",
        f"{10:020d}",  # Delta's own start: a version's prefix
        f"{11:020d}.json",
        "_last_checkpoint",
        f"{99:020d}.json",  # after every version but before the folders
        "zzz",  # after everything
    ]
    for start in starts:
        expected = listing(deltas, spark, log, start)
        assert listing(ours, spark, log, start) == expected, start
    everything = listing(ours, spark, log, f"{0:020d}")
    assert [n for n, _, _ in everything if n.startswith(".")] == [], "Hadoop's checksum files are left out"
    assert [d for n, _, d in everything if n == "zz-folder"] == [True]
    assert f"{11:020d}.json:copy" in [n for n, _, _ in everything]
    assert len(listing(ours, spark, log, f"{10:020d}")) < len(everything) / 3

    with pytest.raises(Py4JJavaError, match="FileNotFoundException"):
        listing(ours, spark, tmp_path / "missing" / "_delta_log", f"{0:020d}.json")
    with pytest.raises(Py4JJavaError, match="FileNotFoundException"):
        listing(deltas, spark, tmp_path / "missing" / "_delta_log", f"{0:020d}.json")
    # an independent reader sees the table the store wrote
    (log / "00000000000000000011.json:copy").unlink()
    (log / "zz-folder").rmdir()
    assert DeltaTable(str(root)).version() == 11 and DeltaTable(str(root)).to_pyarrow_table().num_rows == 36


def test_local_files_get_hadoop_s_permissions_without_a_child_process(spark: Any, tmp_path: Path) -> None:
    jvm = spark._jvm
    conf = spark._jsc.hadoopConfiguration()
    ours = jvm.org.apache.hadoop.fs.FileSystem.get(jvm.java.net.URI("file:///"), conf)
    assert ours.getClass().getName() == LOCAL_FILE_SYSTEM
    hadoops = jvm.org.apache.hadoop.fs.LocalFileSystem()  # Hadoop's own, through chmod processes
    hadoops.initialize(jvm.java.net.URI("file:///"), conf)
    permission = jvm.org.apache.hadoop.fs.permission.FsPermission

    def modes(fs: Any, root: Path) -> dict[str, int]:
        """Make the same files and folders through ``fs``; each one's permission bits."""
        root.mkdir()
        path = jvm.org.apache.hadoop.fs.Path
        fs.create(path(f"file:{root}/default")).close()  # the default: 0666 less the umask
        for mode in (0o600, 0o640, 0o755, 0o444):
            fs.create(path(f"file:{root}/f{mode:o}"), permission(mode), False, 4096, 1, 1 << 20, None).close()
        fs.mkdirs(path(f"file:{root}/d750"), permission(0o750))
        fs.mkdirs(path(f"file:{root}/sticky"), permission(0o755))  # mkdirs applies the umask
        fs.setPermission(path(f"file:{root}/sticky"), permission(0o1777))  # the sticky bit: Hadoop's way
        fs.setPermission(path(f"file:{root}/default"), permission(0o604))
        return {p.name: p.stat().st_mode & 0o7777 for p in sorted(root.iterdir()) if not p.name.startswith(".")}

    expected = modes(hadoops, tmp_path / "hadoop")
    assert modes(ours, tmp_path / "ours") == expected
    assert expected["f640"] == 0o640 and expected["d750"] == 0o750 and expected["sticky"] == 0o1777

    jvm_pid = int(jvm.java.lang.ProcessHandle.current().pid())
    path = jvm.org.apache.hadoop.fs.Path

    def create_files(fs: Any, folder: Path) -> float:
        """CPU seconds the JVM's child processes used while ``fs`` created 200 files (and their .crc)."""
        before = children_cpu_seconds(jvm_pid)
        for i in range(200):
            fs.create(path(f"file:{folder}/{i}")).close()
        return children_cpu_seconds(jvm_pid) - before

    assert create_files(hadoops, tmp_path / "many-hadoop") > 0, "Hadoop's own file system runs chmod"
    assert create_files(ours, tmp_path / "many-ours") == 0, "no child process"
