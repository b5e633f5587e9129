"""Reading what the commit path needs from data files: existence, size, mtime, Parquet footers.

Called by :mod:`commit_service.delta.committer` before each commit (never by the HTTP threads). Uses
pyarrow's filesystems: S3 (endpoint, region and path-style from ``storage.s3``; credentials from
the config or the AWS environment) and the local filesystem. Only footers are read, never data.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyarrow._parquet import ParquetReader

from commit_service.config import S3Settings
from commit_service.domain.content import HEAD_BYTES, Encoding, sniff
from commit_service.domain.paths import StorageUri, UnsafePathError
from commit_service.errors import DataFileError, DataFileUnavailableError
from commit_service.storage.facts import FileFacts
from commit_service.storage.footer import footer_facts


class StorageReader:
    """Opens ``s3a://`` and ``file://`` URIs through pyarrow; one instance per service."""

    def __init__(self, s3: S3Settings | None = None, local_roots: Iterable[str] = ()) -> None:
        self._s3_settings = s3 or S3Settings()
        self._s3: pafs.FileSystem | None = None
        self._local = pafs.LocalFileSystem()
        # local footers read from the disk, not the page cache (an estimate: counted without a lock),
        # as will_read last saw them, and the windows it hints before it looks again
        self._cold_reads = self._cold_reads_seen = self._hints_left = 0
        # the allowed local roots, resolved and ending in "/": a local file is read only if its real
        # path starts with one
        self._local_roots = tuple(
            os.path.realpath(StorageUri.parse(r, root=True).key).rstrip("/") + "/"
            for r in local_roots
            if r.startswith(("file:", "/"))
        )

    def _resolve(self, uri: str, *, source: bool = True) -> tuple[pafs.FileSystem, str]:
        """The filesystem and decoded path of canonical ``uri`` (decoded here, once).

        A local ``source`` must be a regular file (no symlink) whose real path lies under an
        allowed local root, when the reader was given roots (the service always gives them).
        """
        loc = self._parse(uri)
        if loc.scheme == "file":
            if source:
                with self._opened(uri, loc.native):
                    pass  # opened to be checked; the caller reads it by its path
            return self._local, loc.native
        return self._s3_fs(), loc.native

    @staticmethod
    def _parse(uri: str) -> StorageUri:
        try:
            return StorageUri.parse(uri)
        except UnsafePathError as exc:
            raise DataFileError(uri, str(exc)) from None

    def _s3_fs(self) -> pafs.FileSystem:
        if self._s3 is None:
            s = self._s3_settings
            kwargs: dict[str, Any] = {"region": s.region, "force_virtual_addressing": not s.path_style}
            if s.endpoint:
                scheme, _, host = s.endpoint.partition("://")
                kwargs.update(endpoint_override=host or scheme, scheme=scheme if host else "https")
            if s.access_key and s.secret_key:
                kwargs.update(access_key=s.access_key, secret_key=s.secret_key)
            self._s3 = pafs.S3FileSystem(**kwargs)
        return self._s3

    @contextmanager
    def _opened(self, uri: str, path: str) -> Iterator[tuple[int, os.stat_result]]:
        """A local source file, open, and its ``fstat``: a regular file (the name itself no symbolic
        link), whose real path lies under an allowed root. The checks are of the file opened, which
        is the one read (a name swapped for a link after a check of the name would not be); not
        blocking, so a FIFO is refused, not waited on."""
        try:
            fd = os.open(path, SOURCE_OPEN)
        except FileNotFoundError:
            raise DataFileError(uri, "does not exist") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise DataFileError(uri, "is a symbolic link: only regular files are committed") from None
            raise DataFileUnavailableError(uri, f"cannot open: {exc.strerror}") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise DataFileError(uri, "is not a regular file")
            if self._local_roots:
                real = _real_path(fd, path)
                if not real.startswith(self._local_roots):
                    raise DataFileError(uri, "resolves (through a linked folder) to a place outside the allowed roots")
            yield fd, st
        finally:
            os.close(fd)

    def will_read(self, uris: Iterable[str]) -> None:
        """Ask the kernel to start reading the tail of each local file (its footer's
        :data:`LOCAL_TAIL_BYTES`) into the page cache, and return at once: a hint the read-ahead
        gives a window ahead of its reads. One thread reads local footers one after another, so a
        footer not in the page cache cost a wait for the disk each: 10,000 evicted footers read in
        255 µs each, 117 µs hinted, 111 µs from the page cache. A hint costs about 10 µs a file, so
        it is given only while reads find footers on the disk: for :data:`HINTS_AFTER_COLD_READ`
        windows after a read that did. Only a regular file is hinted (no link followed in its name;
        nothing is read into the service); object stores are not (their reads run on many
        threads). Every failure is ignored: the read that follows reports it."""
        if self._cold_reads != self._cold_reads_seen:
            self._cold_reads_seen = self._cold_reads
            self._hints_left = HINTS_AFTER_COLD_READ
        if self._hints_left <= 0:
            return
        self._hints_left -= 1
        for uri in uris:
            if not uri.startswith("file:"):
                continue
            try:
                fd = os.open(StorageUri.parse(uri).native, SOURCE_OPEN)
            except (OSError, UnsafePathError):
                continue
            try:
                st = os.fstat(fd)
                if stat.S_ISREG(st.st_mode):
                    at = max(0, st.st_size - LOCAL_TAIL_BYTES)
                    os.posix_fadvise(fd, at, st.st_size - at, os.POSIX_FADV_WILLNEED)
            except OSError:
                pass
            finally:
                os.close(fd)

    def facts(
        self,
        uri: str,
        *,
        parquet: bool,
        size: int | None = None,
        modified_ms: int | None = None,
        keep_footer: bool = False,
    ) -> FileFacts:
        """A file's size, modification time and (``parquet``) footer facts, with (``keep_footer``) the
        footer itself as Thrift.

        Given the ``size`` and ``modified_ms`` a listing said (a manifest's), a Parquet object in
        S3 is read with one request, its footer's tail at that size, instead of a stat, a second
        stat by the opener and the read: the stat was two thirds of a small file's requests and
        CPU. Any failure there (the object gone, or not that size: its bytes at that size are then
        not a footer's) falls back to the stat and read, which say what is wrong.
        """
        loc = self._parse(uri)
        if loc.scheme == "file":
            return self._local_facts(uri, loc.native, parquet, keep_footer)
        fs, path = self._s3_fs(), loc.native
        if parquet and size is not None and modified_ms is not None:
            meta: pq.FileMetaData | None
            try:
                meta = _footer_at(fs, path, size)
            except Exception:  # the stat and read below say what is wrong
                meta = None
            if meta is not None and _fits(meta, size):
                return _parquet_facts(size, modified_ms, meta, keep_footer)
        try:
            info = fs.get_file_info(path)
        except OSError as exc:
            raise DataFileUnavailableError(uri, f"cannot stat: {exc}") from exc
        if info.type != pafs.FileType.File:
            raise DataFileError(uri, "does not exist")
        mtime = int(info.mtime.timestamp() * 1000) if info.mtime else 0
        if not parquet:
            return FileFacts(int(info.size or 0), mtime)
        try:  # the stat's size: the opener's own stat is not made
            meta = _footer_at(fs, path, int(info.size or 0))
        except OSError as exc:
            raise DataFileUnavailableError(uri, f"cannot read the Parquet footer: {exc}") from exc
        except Exception as exc:  # pyarrow raises ArrowInvalid etc. for a corrupt file
            raise self._unreadable(uri, exc) from exc
        return _parquet_facts(int(info.size or 0), mtime, meta, keep_footer)

    def _local_facts(self, uri: str, path: str, parquet: bool, keep_footer: bool) -> FileFacts:
        """A local file's facts: opened once (:meth:`_opened`), its footer read with one ``pread``
        of its tail (two when the footer is longer than :data:`LOCAL_TAIL_BYTES`) and parsed from
        those bytes. Opening it through pyarrow's filesystem instead (a ``stat``, an open, reads
        through a file object) and the checks by name (``lstat``, ``realpath``'s walk) were a third
        of a small file's facts."""
        with self._opened(uri, path) as (fd, st):
            size, mtime = st.st_size, st.st_mtime_ns // 1_000_000
            if not parquet:
                return FileFacts(size, mtime)
            try:
                tail, cached = _tail(fd, size)
            except OSError as exc:
                raise DataFileUnavailableError(uri, f"cannot read the Parquet footer: {exc}") from exc
            if not cached:
                self._cold_reads += 1  # the read-ahead's hints go on (will_read): an estimate, unlocked
        try:
            meta = footer(pa.BufferReader(tail))  # the tail read as a file: its footer is all a footer read reads
        except Exception as exc:  # pyarrow raises ArrowInvalid etc. for a corrupt file
            raise self._unreadable(uri, exc) from exc
        return _parquet_facts(size, mtime, meta, keep_footer)

    def _unreadable(self, uri: str, exc: Exception) -> DataFileError:
        kind = sniff(self.head(uri))
        what = "" if kind is Encoding.PARQUET else f" (its bytes are {kind.value}: is the sink's format jsonl?)"
        return DataFileError(uri, f"is not a readable Parquet file{what}: {exc}")

    def head(self, uri: str) -> bytes:
        """The first bytes of an object (enough to tell its encoding); empty if unreadable."""
        fs, path = self._resolve(uri)
        try:
            with fs.open_input_stream(path, compression=None) as handle:  # the bytes as stored: never by the name
                return bytes(handle.read(HEAD_BYTES))
        except OSError:
            return b""

    def read_bytes(self, uri: str) -> bytes:
        """A whole object (text files are read whole to be decompressed and parsed)."""
        fs, path = self._resolve(uri)
        try:
            with fs.open_input_stream(path, compression=None) as handle:  # the bytes as stored: never by the name
                return bytes(handle.read())
        except FileNotFoundError:
            raise DataFileError(uri, "does not exist") from None
        except OSError as exc:
            raise DataFileUnavailableError(uri, f"cannot read: {exc}") from exc

    def put(self, uri: str, data: bytes) -> None:
        """Write a small object whole (the service's own records, e.g. dead letters): an S3 put, or a
        local temporary file renamed into place, so a reader never sees it half written."""
        fs, path = self._resolve(uri, source=False)
        try:
            if fs is self._local:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                tmp = f"{path}.lakegate-tmp-{uuid.uuid4().hex}"
                with open(tmp, "wb") as handle:
                    handle.write(data)
                os.replace(tmp, path)
            else:
                with fs.open_output_stream(path) as out:
                    out.write(data)
        except OSError as exc:
            raise DataFileUnavailableError(uri, f"cannot write: {exc}") from exc

    def _own_folder(self, prefix: str) -> tuple[pafs.FileSystem, str]:
        """The filesystem and decoded path of folder ``prefix`` of the service's own objects."""
        fs, path = self._resolve(prefix.rstrip("/") + "/x", source=False)
        return fs, path[: -len("/x")]

    def delete_own(self, prefix: str) -> None:
        """Delete the service's own objects below folder ``prefix`` (none there: nothing to do)."""
        fs, folder = self._own_folder(prefix)
        try:
            if fs.get_file_info(folder).type != pafs.FileType.NotFound:
                fs.delete_dir(folder)
        except OSError as exc:
            raise DataFileUnavailableError(prefix, f"cannot delete: {exc}") from exc

    def list_own(self, prefix: str) -> list[str]:
        """The canonical URIs of the service's own objects below folder ``prefix`` (empty if none)."""
        fs, folder = self._own_folder(prefix)
        try:
            infos = fs.get_file_info(pafs.FileSelector(folder, allow_not_found=True))
        except OSError as exc:
            raise DataFileUnavailableError(prefix, f"cannot list: {exc}") from exc
        base = prefix.rstrip("/")
        return sorted(f"{base}/{quote(i.base_name)}" for i in infos if i.type == pafs.FileType.File)

    def read_own(self, uri: str) -> bytes:
        """One of the service's own objects (not a data file: no root check)."""
        fs, path = self._resolve(uri, source=False)
        try:
            with fs.open_input_stream(path, compression=None) as handle:  # the bytes as stored: never by the name
                return bytes(handle.read())
        except OSError as exc:
            raise DataFileUnavailableError(uri, f"cannot read: {exc}") from exc

    def read_own_column(self, uri: str, column: str) -> list[Any]:
        """One column of a Parquet object of the service's own (a Delta checkpoint's ``txn``): only
        that column's pages are read."""
        fs, path = self._resolve(uri, source=False)
        try:
            return pq.read_table(path, columns=[column], filesystem=fs).column(column).to_pylist()
        except OSError as exc:
            raise DataFileUnavailableError(uri, f"cannot read: {exc}") from exc

    def read_own_fields(self, uri: str, fields: Sequence[str]) -> list[dict[str, Any]]:
        """Fields of one struct column of a Parquet object of the service's own (a Delta
        checkpoint's ``add.path`` and ``add.stats``), each row as {field's last name: value}: only
        those fields' pages are read, never the struct's others (its map of partition values)."""
        fs, path = self._resolve(uri, source=False)
        try:
            return pq.read_table(path, columns=list(fields), filesystem=fs).to_pylist()
        except OSError as exc:
            raise DataFileUnavailableError(uri, f"cannot read: {exc}") from exc

    def copy(self, src: str, dst: str) -> None:
        """Copy object ``src`` to ``dst`` so that ``dst`` is either absent or whole, never partial.

        Same bucket store: S3 server-side copy (atomic). Local to local: a hard link when on one
        file system, else a copy, to a temporary name in the destination directory renamed into
        place. Anything else streams through this process (an S3 upload is atomic on completion).
        Copying again overwrites with the same bytes, so a retried commit may copy again.
        """
        src_fs, src_path = self._resolve(src)
        dst_fs, dst_path = self._resolve(dst, source=False)
        try:
            if src_fs is self._local and dst_fs is self._local:
                _local_copy(src_path, dst_path)
            elif src_fs is dst_fs:
                dst_fs.copy_file(src_path, dst_path)
            else:
                if dst_fs is self._local:
                    os.makedirs(os.path.dirname(dst_path), exist_ok=True)
                pafs.copy_files(src_path, dst_path, source_filesystem=src_fs, destination_filesystem=dst_fs)
        except FileNotFoundError:
            raise DataFileError(src, "does not exist") from None
        except OSError as exc:
            raise DataFileUnavailableError(src, f"cannot copy to {dst}: {exc}") from exc


def footer(handle: pa.NativeFile) -> pq.FileMetaData:
    """The footer of an open Parquet file, read by the reader ``pq.ParquetFile`` wraps: the
    wrapper's own set-up (read buffers, a map of nested column paths) took two thirds of a small
    file's footer read, and the commit reads nothing else."""
    reader = ParquetReader()
    reader.open(handle)
    return reader.metadata


PARQUET = ds.ParquetFileFormat()
FOOTER_TAIL = 8  # a Parquet file ends with its footer's length (4 bytes) and ``PAR1``
PARQUET_MAGIC = b"PAR1"
LOCAL_TAIL_BYTES = 8 << 10  # a local footer's first read: two pages, all of a footer of some tens of columns
# how a local source is opened, to be read or hinted: no link followed in its name, a FIFO not waited on
SOURCE_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
HINTS_AFTER_COLD_READ = 64  # windows will_read hints after a footer was read from the disk


def _tail(fd: int, size: int) -> tuple[bytes | bytearray, bool]:
    """The last bytes of the open file ``fd`` of ``size`` bytes that hold its Parquet footer: its
    last :data:`LOCAL_TAIL_BYTES`, or the footer whole when its length (in its last 8 bytes) says
    it is longer. What is no footer is returned as read, for the parse to refuse. And whether the
    first read found its bytes in the page cache (asked of the kernel without waiting for the disk,
    ``RWF_NOWAIT``; a file system that cannot tell counts as cached)."""
    n = min(size, LOCAL_TAIL_BYTES)
    tail, cached = _read_cached(fd, n, size - n)
    if len(tail) == n >= FOOTER_TAIL and tail[-4:] == PARQUET_MAGIC:
        whole = int.from_bytes(tail[-FOOTER_TAIL:-4], "little") + FOOTER_TAIL
        if n < whole <= size:
            tail = os.pread(fd, whole, size - whole)
    return tail, cached


def _read_cached(fd: int, n: int, at: int) -> tuple[bytes | bytearray, bool]:
    """``n`` bytes of ``fd`` at ``at``, taken from the page cache without waiting when it holds them
    all, else read from the disk; and whether it did."""
    buf = bytearray(n)
    try:
        if os.preadv(fd, [buf], at, os.RWF_NOWAIT) == n:
            return buf, True
    except BlockingIOError:  # not (all) in the page cache
        pass
    except OSError:  # the file system cannot read without waiting: it cannot tell
        return os.pread(fd, n, at), True
    return os.pread(fd, n, at), False


def _real_path(fd: int, path: str) -> str:
    """The real path of the open file ``fd``: what the kernel says it opened (Linux's
    ``/proc/self/fd``, one call), else ``realpath`` of ``path`` (a walk of its folders)."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return os.path.realpath(path)


def _footer_at(fs: pafs.FileSystem, path: str, size: int) -> pq.FileMetaData:
    """The footer of the Parquet object at ``path`` taken to be ``size`` bytes long: one ranged
    read of its tail (up to 64 KiB, the whole of a small file), no stat. Raises when the bytes
    there are not a footer."""
    return PARQUET.make_fragment(path, filesystem=fs, file_size=size).metadata


def _fits(meta: pq.FileMetaData, size: int) -> bool:
    """Whether the last row group's column chunks end below the footer of a file of ``size``
    bytes: a footer read at a size a listing said, from an object since rewritten longer, would
    have to pass this as well as the magic bytes and the footer's own parse."""
    data_end = 4  # the leading ``PAR1``
    if meta.num_row_groups:
        group = meta.row_group(meta.num_row_groups - 1)
        for c in range(group.num_columns):
            chunk = group.column(c)
            first = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
            data_end = max(data_end, first + chunk.total_compressed_size)
    return data_end + meta.serialized_size + FOOTER_TAIL <= size


def _parquet_facts(size: int, modified_ms: int, meta: pq.FileMetaData, keep_footer: bool) -> FileFacts:
    got = footer_facts(meta)
    layout = got.layout
    return FileFacts(
        size,
        modified_ms,
        got.num_rows,
        got.stats_json,
        layout.schema_key,
        layout.columns,
        got.coverage,
        got.null_strings,
        got.times,
        thrift(meta) if keep_footer else None,
    )


def thrift(meta: pq.FileMetaData) -> bytes:
    """A footer as the Thrift ``FileMetaData`` a Parquet file ends with (written again by Arrow from
    what it parsed, every field kept: parquet-java reads it as it reads the file's own)."""
    out = pa.BufferOutputStream()
    meta.write_metadata_file(out)  # PAR1, the footer, its length, PAR1
    return out.getvalue().to_pybytes()[len(PARQUET_MAGIC) : -FOOTER_TAIL]


def _local_copy(src: str, dst: str) -> None:
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    tmp = f"{dst}.lakegate-tmp-{uuid.uuid4().hex}"
    try:
        try:
            os.link(src, tmp)
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
                raise
            shutil.copyfile(src, tmp)
        os.replace(tmp, dst)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
