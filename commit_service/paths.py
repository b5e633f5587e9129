"""Storage URIs as the service accepts them: normalised, and checked against the allowed roots.

Called by the HTTP layer on every manifest file and by the commit path for table locations.
``s3://`` is accepted and normalised to ``s3a://`` (what Hadoop reads); local files are
``file:///abs/path``. Anything else, a relative path, or a ``..`` segment is refused.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit


class UnsafePathError(ValueError):
    """A path the service will not touch; the message says why."""


def normalize_uri(uri: str) -> str:
    """``s3://b/k`` -> ``s3a://b/k``; ``/abs`` or ``file:/abs`` -> ``file:///abs``; else refuse."""
    if not uri or any(ord(c) < 32 for c in uri):
        raise UnsafePathError("path is empty or holds control characters")
    if uri.startswith("/"):
        uri = "file://" + uri
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if scheme == "s3":
        scheme = "s3a"
    if scheme not in ("s3a", "file"):
        raise UnsafePathError(f"scheme {parts.scheme or '(none)'!r} is not allowed: use s3a://, s3:// or file:///")
    if parts.query or parts.fragment:
        raise UnsafePathError("path must not carry a query or fragment")
    path = unquote(parts.path)
    if ".." in path.split("/") or "/./" in path + "/":
        raise UnsafePathError("path must not contain '..' or '.' segments")
    if scheme == "s3a":
        if not parts.netloc or not path.strip("/"):
            raise UnsafePathError("s3 path needs a bucket and a key")
        return f"s3a://{parts.netloc}{posixpath.normpath(path) if path != '/' else '/'}"
    if parts.netloc not in ("", "localhost"):
        raise UnsafePathError("file:// paths must be local (file:///abs/path)")
    if not path.startswith("/"):
        raise UnsafePathError("file path must be absolute")
    return "file://" + posixpath.normpath(path)


def is_under(uri: str, roots: Iterable[str]) -> bool:
    """Whether normalised ``uri`` lies strictly below one of the (normalised) ``roots``."""
    for root in roots:
        base = root_prefix(root)
        if uri.startswith(base) and len(uri) > len(base):
            return True
    return False


def root_prefix(root: str) -> str:
    """An allowed root as the prefix a normalised URI must start with (``s3://`` -> ``s3a://``)."""
    scheme, sep, rest = root.partition("://")
    scheme = "s3a" if scheme.lower() in ("s3", "s3a") else scheme.lower()
    return f"{scheme}{sep}{rest.rstrip('/')}/"


def table_location(path: str) -> str:
    """A table's location for Spark/Delta: ``s3a://bucket/key`` or an absolute local path."""
    uri = normalize_uri(path)
    return uri[len("file://") :] if uri.startswith("file://") else uri
