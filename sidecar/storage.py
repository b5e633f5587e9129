"""Finding the storage sink's data files and reading their names.

Read by the sidecar loop each round. A :class:`NamePattern` turns an object key into
(topic, partition, start offset): the ``aiven`` preset (``<prefix><topic>-<partition>-<start>``,
topics may contain ``-``; an extension such as ``.gz`` is allowed), the ``confluent`` preset
(``<topics.dir>/<topic>/<encoded partition>/<topic>+<p>+<start>.<ext>``, whatever the partitioner:
where each topic is listed follows its connector's config, :meth:`NamePattern.follow`) or a custom regex with named
groups ``topic``, ``partition``, ``start_offset``. Listers return every key under the prefix with
its size and when it was written; S3 through MinIO's client (endpoint, region, path-style, credentials from the AWS
environment), or a local directory.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Container, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Protocol
from urllib.parse import urlsplit

from lakegate_core.sink_config import NAMING_PRESETS, ConfluentLayout
from lakegate_core.types import TopicPartition
from lakegate_core.uri import encode_key
from sidecar.errors import SidecarConfigError, SourceError

logger = logging.getLogger(__name__)

DEFAULT_CONFLUENT = ConfluentLayout()
PRESETS = NAMING_PRESETS  # shared with the service's doctor, which checks a connector's names against them


@dataclass(frozen=True)
class StoredFile:
    """One object as listed: its key, size, and the (topic, partition, start) its name says."""

    key: str
    size: int
    topic: str
    partition: int
    start_offset: int
    digits: int = 0  # how many digits its name gives the start offset
    padded: bool = False  # ... with leading zeros (names of one width then sort by offset)
    modified_ms: int | None = None  # when it was written, as the listing says (None: not said)

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class NamePattern:
    """Parses keys (relative to the configured prefix) by a preset or a custom regex."""

    def __init__(self, naming: str | dict[str, str], prefix: str = "") -> None:
        self.preset: str | None = None
        if isinstance(naming, dict):
            if set(naming) != {"regex"}:
                raise SidecarConfigError("storage.naming: use aiven, confluent or {regex: '...'}")
            source = naming["regex"]
        elif naming in PRESETS:
            source = PRESETS[naming]
            self.preset = naming
        else:
            raise SidecarConfigError(f"storage.naming: {naming!r} is not one of {sorted(PRESETS)} or {{regex: ...}}")
        try:
            self.regex = re.compile(source)
        except re.error as exc:
            raise SidecarConfigError(f"storage.naming.regex: {exc}") from None
        missing = {"topic", "partition", "start_offset"} - set(self.regex.groupindex)
        if missing:
            raise SidecarConfigError(f"storage.naming.regex: named groups missing: {sorted(missing)}")
        self.prefix = prefix
        self._warned: set[str] = set()
        self._confluent: dict[str, ConfluentLayout] = {}  # topic -> its connector's layout (confluent preset)

    def follow(self, topics: Iterable[str], layout: ConfluentLayout | None) -> None:
        """Where a followed connector of Confluent's sink writes its ``topics`` (its ``topics.dir``,
        partitioner and delimiters); a topic not told is taken to be in Confluent's defaults."""
        if self.preset == "confluent" and layout is not None:
            self._confluent.update(dict.fromkeys(topics, layout))

    def _layout(self, topic: str) -> ConfluentLayout:
        return self._confluent.get(topic, DEFAULT_CONFLUENT)

    def _rooted(self, key: str) -> str:
        """A key of Confluent's layout under the configured prefix: ``topics.dir`` already under it
        is kept, any other is put below it."""
        return key if key.startswith(self.prefix) else self.prefix + key

    def key_prefix(self, topic: str) -> str:
        """The narrowest listing prefix that holds every file of ``topic``."""
        if self.preset == "aiven":
            return f"{self.prefix}{topic}-"
        if self.preset == "confluent":
            return self._rooted(self._layout(topic).topic_prefix(topic))
        return self.prefix

    def partition_prefix(self, tp: TopicPartition) -> str | None:
        """What every key of a file of ``tp`` starts with, up to its start offset's digits (presets
        only; a custom regex: None): a listing prefix holding ``tp``'s files alone, to which a
        padded offset appends a ``StartAfter`` key."""
        if self.preset == "aiven":
            return f"{self.prefix}{tp.topic}-{tp.partition}-"
        if self.preset == "confluent":
            prefix = self._layout(tp.topic).partition_prefix(tp.topic, tp.partition)
            return None if prefix is None else self._rooted(prefix)  # files of many partitions share directories
        return None

    def parse(self, key: str, size: int, modified_ms: int | None = None) -> StoredFile | None:
        """The file a key names, or None (logged) when it does not match the pattern."""
        if not key.startswith(self.prefix):
            return None
        m = self.regex.fullmatch(key[len(self.prefix) :])
        if m is None:
            if key not in self._warned and len(self._warned) < 10_000:  # once per key, bounded
                self._warned.add(key)
                logger.warning("skipping %s: its name does not match the naming pattern", key)
            return None
        digits = m["start_offset"]
        padded = len(digits) > 1 and digits[0] == "0"
        return StoredFile(key, size, m["topic"], int(m["partition"]), int(digits), len(digits), padded, modified_ms)


class Listed(NamedTuple):
    """One object of a listing: its key, its size, and when it was written (ms since the epoch)."""

    key: str
    size: int
    modified_ms: int | None = None


class Lister(Protocol):
    """Lists every key (with its size and, where the store says, its modification time) under a
    prefix, in key order after ``start_after`` when given (S3's ``StartAfter``); the loop's storage
    seam. An item may be a bare ``(key, size)``: :meth:`NamePattern.parse` takes either."""

    def list(
        self, prefix: str, start_after: str | None = None, page: int | None = None
    ) -> Iterable[Listed | tuple[str, int]]:
        """``page``: keys a request asks for (S3's ``max-keys``) when the caller reads only about
        that many; None: the store's largest page (1,000 on S3)."""
        ...

    def uri(self, key: str) -> str:
        """The key as a percent-encoded URI (the service decodes it exactly once)."""
        ...


class S3Lister:
    """Lists a bucket with ListObjectsV2 (paginated) through MinIO's S3 client; URIs are ``s3a://bucket/key``.

    MinIO's client rather than boto3 because the sidecar runs beside every Connect worker: it holds
    about 6 MiB where a boto3 S3 client holds about 25 (botocore's parsed service models).
    Credentials are looked up when the first listing needs them, in this order: the
    ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY`` (``AWS_SESSION_TOKEN``) variables, the profile
    ``AWS_PROFILE`` (``default``) of the shared credentials file, then web identity (IRSA:
    ``AWS_WEB_IDENTITY_TOKEN_FILE`` + ``AWS_ROLE_ARN``), container credentials (ECS, EKS Pod
    Identity) or the instance role.
    """

    def __init__(
        self,
        bucket: str,
        *,
        endpoint: str | None = None,
        region: str = "us-east-1",
        path_style: bool = True,
        client: Any = None,
    ) -> None:
        self.bucket = bucket
        self.client = client if client is not None else _minio_client(endpoint, region, path_style)

    def list(self, prefix: str, start_after: str | None = None, page: int | None = None) -> Iterator[Listed]:
        try:
            for obj in self._objects(prefix, start_after, page):
                when = obj.last_modified
                yield Listed(obj.object_name, int(obj.size or 0), int(when.timestamp() * 1000) if when else None)
        except Exception as exc:  # S3, HTTP and credential errors alike; the loop retries next round
            raise SourceError(f"listing s3://{self.bucket}/{prefix}: {exc}") from exc

    def _objects(self, prefix: str, start_after: str | None, page: int | None) -> Iterator[Any]:
        """MinIO's listing, in pages of ``page`` keys when given: its public ``list_objects`` asks
        for 1,000 a page and parses each page whole (every key's time through ``strptime``), which
        was most of a windowed listing's CPU when a window reads 201 keys. The page size is only
        reachable through its ``_list_objects``; a MinIO without it lists as ``list_objects`` does."""
        if page is not None:
            try:
                return iter(
                    self.client._list_objects(
                        self.bucket, prefix=prefix, start_after=start_after, encoding_type="url", max_keys=page
                    )
                )
            except TypeError:  # another MinIO: its public listing, in pages of 1,000
                pass
        return iter(self.client.list_objects(self.bucket, prefix=prefix, recursive=True, start_after=start_after))

    def uri(self, key: str) -> str:
        return f"s3a://{self.bucket}/{encode_key(key)}"


def credential_chain(http: Any = None) -> Any:
    """The AWS credentials the S3 lister signs with, first found wins (see :class:`S3Lister`).

    ``http`` is the urllib3 pool for the web-identity, container and instance-metadata lookups.
    """
    from minio.credentials import AWSConfigProvider, ChainedProvider, EnvAWSProvider, IamAwsProvider

    return ChainedProvider([EnvAWSProvider(), AWSConfigProvider(), IamAwsProvider(http_client=http)])


def _minio_client(endpoint: str | None, region: str, path_style: bool) -> Any:
    """An S3 client for ``endpoint`` (an ``http(s)://host[:port]`` URL; AWS when None).

    Bounded waits: 10 s to connect, 60 s per read, three retries of a 5xx or a dropped connection;
    the credential lookups give up after 2 s without a connection, so a sidecar off AWS without
    credentials reports an error each round instead of hanging. TLS is verified against
    ``SSL_CERT_FILE`` or certifi's bundle.
    """
    import certifi
    import urllib3
    from minio import Minio

    if endpoint is None:
        host, secure = "s3.amazonaws.com", True
    else:
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/") or parts.query:
            raise SidecarConfigError(f"storage.endpoint: {endpoint!r} must be http(s)://host[:port]")
        host, secure = parts.netloc, parts.scheme == "https"
    ca_certs = os.environ.get("SSL_CERT_FILE") or certifi.where()
    http = urllib3.PoolManager(
        timeout=urllib3.Timeout(connect=10, read=60),
        retries=urllib3.Retry(total=3, backoff_factor=0.5, status_forcelist=[500, 502, 503, 504]),
        maxsize=8,  # the listing plan lists up to 8 partitions at once (sidecar.listing)
        ca_certs=ca_certs,
    )
    lookups = urllib3.PoolManager(timeout=urllib3.Timeout(connect=2, read=10), retries=1, ca_certs=ca_certs)
    try:
        client = Minio(host, secure=secure, region=region, http_client=http, credentials=credential_chain(lookups))
    except ValueError as exc:  # a bad region or host
        raise SidecarConfigError(f"storage: {exc}") from None
    if path_style:
        client.disable_virtual_style_endpoint()
    else:
        client.enable_virtual_style_endpoint()
    return client


class LocalLister:
    """Lists a local directory tree; keys are paths relative to it, URIs ``file:///abs``."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def list(self, prefix: str, start_after: str | None = None, page: int | None = None) -> Iterator[Listed]:
        """In key order, as S3 lists (a listing window relies on it); ``page`` means nothing here."""
        keys = []
        for dirpath, _, names in os.walk(self.root):
            for name in names:
                key = (Path(dirpath) / name).relative_to(self.root).as_posix()
                if (start_after is None or key > start_after) and key.startswith(prefix) and not name.startswith("."):
                    keys.append(key)
        for key in sorted(keys):
            try:
                st = (self.root / key).stat()
            except FileNotFoundError:
                continue
            yield Listed(key, st.st_size, st.st_mtime_ns // 1_000_000)

    def uri(self, key: str) -> str:
        return f"file://{encode_key(str(self.root / key))}"


def list_files(
    lister: Lister,
    pattern: NamePattern,
    topics: Iterable[str],
    since: Mapping[TopicPartition, int] | None = None,
    spans: Container[tuple[str, int]] = (),
    counts: dict[str, int] | None = None,
) -> dict[TopicPartition, list[StoredFile]]:
    """Every parseable file of ``topics``, grouped by partition, sorted by start offset.

    With ``since`` (the loop's: each owned partition's next offset in the table), only those
    partitions' files, and of the files starting below a partition's offset only the last one
    (it may straddle the offset) and those whose content span is known (``spans``: key and size,
    the orphan guard's); the others are wholly in the table already, and the listing streams, so
    what is kept is the files in flight, not the landing prefix's whole history. ``counts``, if
    given, gets per topic how many of its files the listing met (kept or not)."""
    out: dict[TopicPartition, list[StoredFile]] = {}
    last_below: dict[TopicPartition, StoredFile] = {}
    wanted = set(topics)
    for prefix in sorted({pattern.key_prefix(t) for t in wanted}):
        for listed in lister.list(prefix):
            f = pattern.parse(*listed)
            if f is None or f.topic not in wanted:
                continue
            if counts is not None:
                counts[f.topic] = counts.get(f.topic, 0) + 1
            if since is not None:
                if f.tp not in since:
                    continue  # another worker's partition
                if f.start_offset < since[f.tp] and (f.key, f.size) not in spans:
                    kept = last_below.get(f.tp)
                    if kept is None or f.start_offset > kept.start_offset:
                        last_below[f.tp] = f
                    continue
            out.setdefault(f.tp, []).append(f)
    for tp, f in last_below.items():
        out.setdefault(tp, []).append(f)
    for files in out.values():
        files.sort(key=lambda f: f.start_offset)
    return out
