"""The one path model: where a data file or table lives, as one canonical percent-encoded URI.

Every location the service handles (manifest file paths, table paths, allowed roots) is parsed
here ONCE into a :class:`StorageUri` and from then on carried as its canonical text
(:attr:`StorageUri.uri`): ``s3a://bucket/<key percent-encoded>`` or ``file:///<path
percent-encoded>``. Percent-decoding happens exactly once, in :meth:`StorageUri.parse`; each
consumer then asks for the form it needs:

- the HTTP layer (:mod:`commit_service.coordination.coordinator`) and the config check roots on the canonical
  text: encoding is per character and never touches ``/``, so "``K`` lies under root ``R``" is a
  prefix test on whole segments;
- :mod:`commit_service.storage.reader` (pyarrow) opens :attr:`StorageUri.native` (the decoded key);
- Spark and Delta get :attr:`StorageUri.hadoop` for ``Path(String)`` (the decoded key: that
  constructor quotes every character itself, ``%`` included);
- a Delta ``AddFile.path`` is :func:`delta_path`: relative to the table root, every byte but
  unreserved characters and ``/`` percent-encoded (the Delta protocol stores RFC 2396 URIs that
  readers decode once), or the absolute canonical URI for a file outside the root.

Refused (:class:`UnsafePathError`, a 400 at intake): schemes other than ``s3``/``s3a``/``file``,
a query or fragment (``?``/``#`` must be percent-encoded), malformed ``%`` escapes, control
characters, empty, ``.`` or ``..`` segments (after decoding, so ``%2e%2e`` is ``..``), a key
ending in ``/`` (not an object), Hadoop glob characters ``[]{}*?\\`` (Spark would expand them),
``:`` (Hadoop's ``Path`` takes it for a scheme inside a file name), a file name starting with
``_`` or ``.`` (Spark's file readers skip those as hidden), keys over 1,024 bytes. A bare
absolute path ``/a b/c`` is a local path taken literally (nothing is decoded). Symlinks and the
resolved location of local files are checked where files are opened
(:mod:`commit_service.storage.reader`), since only there is the file system asked.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import SplitResult, quote, unquote, urlsplit

from lakegate_core.uri import encode_key

MAX_KEY_BYTES = 1024  # S3's limit on a key
GLOB_CHARS = frozenset("[]{}*?\\")  # Hadoop's globStatus would expand these in Spark's readers
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")  # one search per path: a manifest holds up to 10,000


class UnsafePathError(ValueError):
    """A path the service will not touch; the message says why."""


@dataclass(frozen=True)
class StorageUri:
    """A parsed location: ``scheme`` ``s3a`` or ``file``, ``bucket`` (empty for local files) and the
    decoded ``key`` (an S3 key without leading ``/``; for local files the absolute path)."""

    scheme: str
    bucket: str
    key: str

    @classmethod
    def parse(cls, text: str, *, root: bool = False) -> StorageUri:
        """Parse (and percent-decode once) a URI; ``root`` allows a bucket or ``/`` with no key."""
        if not text or _CONTROL.search(text):
            raise UnsafePathError("path is empty or holds control characters")
        if text.startswith("/"):  # a bare local path: literal, nothing to decode
            return cls._checked("file", "", text, root)
        parts = _split(text)
        scheme = parts.scheme.lower()
        if scheme == "s3":
            scheme = "s3a"
        if scheme not in ("s3a", "file"):
            raise UnsafePathError(f"scheme {parts.scheme or '(none)'!r} is not allowed: use s3a://, s3:// or file:///")
        if parts.query or parts.fragment or "?" in text or "#" in text:
            raise UnsafePathError("path must not carry a query or fragment: percent-encode '?' as %3F and '#' as %23")
        if _BAD_ESCAPE.search(parts.path):
            raise UnsafePathError("path holds a '%' that is not a %XX escape: write a literal '%' as %25")
        try:
            path = unquote(parts.path, errors="strict")
        except UnicodeDecodeError:
            raise UnsafePathError("path's %XX escapes are not UTF-8") from None
        if scheme == "s3a":
            if not parts.netloc or "@" in parts.netloc or ":" in parts.netloc:
                raise UnsafePathError("s3 path needs a bucket name (s3a://bucket/key)")
            return cls._checked(scheme, parts.netloc, path.removeprefix("/"), root)
        if parts.netloc not in ("", "localhost"):
            raise UnsafePathError("file:// paths must be local (file:///abs/path)")
        if not path.startswith("/"):
            raise UnsafePathError("file path must be absolute")
        return cls._checked(scheme, "", path, root)

    @classmethod
    def _checked(cls, scheme: str, bucket: str, key: str, root: bool) -> StorageUri:
        if _CONTROL.search(key):
            raise UnsafePathError("path holds control characters (after percent-decoding)")
        if len(key.encode("utf-8", "surrogatepass")) > MAX_KEY_BYTES:
            raise UnsafePathError(f"path is longer than {MAX_KEY_BYTES} bytes")
        glob = sorted(GLOB_CHARS.intersection(key))
        if glob:
            raise UnsafePathError(f"path holds {''.join(glob)!r}: Spark would read them as a glob pattern")
        if ":" in key:
            raise UnsafePathError("path holds ':', which Hadoop cannot address in a file name (HADOOP-3257)")
        body = key.removeprefix("/") if scheme == "file" else key
        if root:
            body = body.rstrip("/")
        elif not body or body.endswith("/"):
            raise UnsafePathError("path names a folder, not an object (it is empty or ends in '/')")
        segments = body.split("/") if body else []
        if any(s in ("", ".", "..") for s in segments):
            raise UnsafePathError("path must not contain empty, '.' or '..' segments (also not percent-encoded)")
        if not root and segments[-1].startswith(("_", ".")):
            raise UnsafePathError("file name starts with '_' or '.': Spark's readers skip such files as hidden")
        if scheme == "file" and not root and _object_store_part(segments[-1]):
            raise UnsafePathError(
                "local file name ends in '#<digits>' after its first '#': delta-rs (Rust object_store) takes such "
                "names for its own upload parts on local disks and cannot read a table holding one"
            )
        return cls(scheme, bucket, ("/" if scheme == "file" else "") + body)

    @property
    def uri(self) -> str:
        """The canonical text: what the service stores, compares, logs and answers."""
        encoded = encode_key(self.key)
        return f"s3a://{self.bucket}/{encoded}" if self.scheme == "s3a" else f"file://{encoded}"

    @property
    def native(self) -> str:
        """The decoded form pyarrow opens: ``bucket/key`` or the absolute local path."""
        return f"{self.bucket}/{self.key}" if self.scheme == "s3a" else self.key

    @property
    def hadoop(self) -> str:
        """The text for Hadoop's ``Path(String)`` (Spark readers, ``DeltaLog.forTable``): decoded,
        since that constructor quotes every character itself (``%`` included)."""
        return f"s3a://{self.bucket}/{self.key}" if self.scheme == "s3a" else self.key


def _object_store_part(name: str) -> bool:
    """object_store's LocalFileSystem refuses a file name whose text after the first '#' is all
    digits (``a#12``, ``#1``): it names the parts of its multipart uploads so."""
    _, hash_sign, suffix = name.partition("#")
    return bool(hash_sign and suffix and suffix.isascii() and suffix.isdigit())


def _split(text: str) -> SplitResult:
    """``urlsplit(text)``, without its general machinery for the canonical forms every manifest
    path takes (``s3a://bucket/key``, ``file:///path``): 10,000 paths a manifest at most, urlsplit
    was a third of a path's check. Anything else (a query, a fragment, brackets, another scheme or
    case) goes to urlsplit."""
    if "?" not in text and "#" not in text:
        if text.startswith("file:///"):
            return SplitResult("file", "", text[7:], "", "")
        if text.startswith("s3a://"):
            netloc, slash, path = text[6:].partition("/")
            if "[" not in netloc and "]" not in netloc:
                return SplitResult("s3a", netloc, slash + path, "", "")
    return urlsplit(text)


def normalize_uri(uri: str) -> str:
    """The canonical text of ``uri`` (``s3://b/k`` -> ``s3a://b/k``; ``/abs`` -> ``file:///abs``)."""
    return StorageUri.parse(uri).uri


def is_under(uri: str, roots: Iterable[str]) -> bool:
    """Whether canonical ``uri`` lies strictly below one of the ``roots``."""
    for root in roots:
        base = root_prefix(root)
        if uri.startswith(base) and len(uri) > len(base):
            return True
    return False


@functools.lru_cache(maxsize=1024)
def root_prefix(root: str) -> str:
    """An allowed root or table path as the canonical prefix its files start with (ends in ``/``);
    cached: configured roots are few and each manifest file is checked against them."""
    uri = StorageUri.parse(root, root=True).uri
    return uri if uri.endswith("/") else uri + "/"


def table_location(path: str) -> str:
    """A table's or file's location for Spark/Delta (``Path(String)``): see :attr:`StorageUri.hadoop`."""
    return StorageUri.parse(path, root=True).hadoop


def delta_path(uri: str, root: str) -> str:
    """A file's ``AddFile.path``: relative to ``root`` (a :func:`root_prefix`) when under it, fully
    percent-encoded; else the absolute canonical URI."""
    if uri.startswith(root) and len(uri) > len(root):
        return quote(unquote(uri[len(root) :]), safe="/")
    return uri


def file_uri(path: str, root: str) -> str:
    """The canonical URI of a file an ``AddFile.path`` names (:func:`delta_path`'s inverse): a
    relative path is below ``root`` (a :func:`root_prefix`), an absolute one is normalized."""
    if "://" in path or path.startswith("/"):
        return normalize_uri(path)
    return root + path
