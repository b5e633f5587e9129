"""How an object key is written into a URI: the one percent-encoding the service and the sidecar share.

The sidecar encodes each key it lists with :func:`encode_key`; the service parses paths (decoding
once, ``commit_service.domain.paths``) and writes its canonical URIs with the same function, so a path
the sidecar sent comes back in every receipt and report exactly as it was sent.
"""

from __future__ import annotations

from urllib.parse import quote

# RFC 3986 path characters kept as they are: unreserved, sub-delims, '@' and '/'. '%' is always
# encoded (it starts an escape) and so is ':' (Hadoop cannot address it; the service refuses it).
KEY_SAFE = "/!$&'()*+,;=@-._~"


def encode_key(key: str) -> str:
    """``key`` percent-encoded for the path of an ``s3a://`` or ``file://`` URI."""
    return quote(key, safe=KEY_SAFE)
