"""The path model (commit_service.domain.paths): one canonical URI, decoded exactly once per consumer."""

from __future__ import annotations

from urllib.parse import quote, unquote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commit_service.domain.paths import (
    GLOB_CHARS,
    StorageUri,
    UnsafePathError,
    delta_path,
    is_under,
    normalize_uri,
    root_prefix,
)

ROOT = "s3a://bucket/landing/"
# the characters real sinks and careless users put in keys, plus arbitrary unicode
KEY_CHARS = st.sampled_from(list(" %+=#?&:@,;!$'()~/.-_é中\u00a0") + list(GLOB_CHARS)) | st.characters(
    blacklist_categories=("Cs",)
)
KEYS = st.text(KEY_CHARS, min_size=1, max_size=40)


def _accepted(text: str) -> StorageUri | None:
    try:
        return StorageUri.parse(text)
    except UnsafePathError:
        return None


@settings(max_examples=2000, deadline=None)
@given(KEYS)
def test_a_key_is_refused_or_every_consumer_sees_exactly_that_object(key: str) -> None:
    """Sent percent-encoded, a key is either refused or kept exactly, in every consumer's form."""
    loc = _accepted(f"{ROOT}{quote(key, safe='/')}")
    if loc is None:
        return
    assert loc.key == f"landing/{key}"
    assert loc.native == f"bucket/landing/{key}"  # pyarrow opens the decoded key
    assert loc.hadoop == f"s3a://bucket/landing/{key}"  # Hadoop's Path(String) quotes it itself
    assert normalize_uri(loc.uri) == loc.uri  # canonical: parsing it again changes nothing
    assert StorageUri.parse(loc.uri) == loc
    assert is_under(loc.uri, [ROOT])
    relative = delta_path(loc.uri, root_prefix(ROOT))
    assert unquote(relative) == key  # a Delta reader decodes AddFile.path once
    assert all(c.isalnum() or c in "/%-._~" for c in relative)  # everything else percent-encoded
    assert not {".", "..", ""} & set(key.split("/")) and not key.split("/")[-1].startswith(("_", "."))
    assert not (GLOB_CHARS | {":"}) & set(key) and not key.endswith("/")


@settings(max_examples=500, deadline=None)
@given(KEYS, st.integers(1, 3))
def test_no_encoding_of_dot_dot_leaves_the_root(tail: str, times: int) -> None:
    """However often ``..`` is percent-encoded, the key either is refused or stays a name under the root."""
    text = "../" + tail
    for _ in range(times):
        text = quote(text, safe="")
    loc = _accepted(f"{ROOT}{text}")
    if loc is None:
        return
    assert loc.key.startswith("landing/") and ".." not in loc.key.split("/")
    # each consumer decodes its form once and gets the literal key, never the '..' it would hide
    assert loc.hadoop.startswith("s3a://bucket/landing/")
    assert unquote(delta_path(loc.uri, root_prefix(ROOT))) == loc.key.removeprefix("landing/")


def test_double_encoded_dot_dot_is_a_literal_name() -> None:
    """The reported escape: ``%252e%252e`` is the object key ``%2e%2e``, read as such by everyone."""
    loc = StorageUri.parse(f"{ROOT}%252e%252e/outside/x.parquet")
    assert loc.key == "landing/%2e%2e/outside/x.parquet"
    assert loc.hadoop == "s3a://bucket/landing/%2e%2e/outside/x.parquet"
    assert delta_path(loc.uri, root_prefix(ROOT)) == "%252e%252e/outside/x.parquet"


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ("s3://bucket/landing/a b.parquet", "s3a://bucket/landing/a%20b.parquet"),
        ("s3a://bucket/landing/a%20b.parquet", "s3a://bucket/landing/a%20b.parquet"),
        ("s3a://bucket/landing/t+0+0=1", "s3a://bucket/landing/t+0+0=1"),
        ("s3a://bucket/landing/%3D", "s3a://bucket/landing/="),
        ("s3a://bucket/landing/100%25", "s3a://bucket/landing/100%25"),
        ("s3a://bucket/landing/caf%C3%A9", "s3a://bucket/landing/caf%C3%A9"),
        ("/tmp/a b/100%", "file:///tmp/a%20b/100%25"),
    ],
)
def test_canonical_form(raw: str, canonical: str) -> None:
    assert normalize_uri(raw) == canonical


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        ("s3a://bucket/landing/100%", "not a %XX escape"),
        ("s3a://bucket/landing/%ff", "not UTF-8"),
        ("s3a://bucket/landing/a?b", "query"),
        ("s3a://bucket/landing/a#b", "query or fragment"),
        ("s3a://bucket/landing/%2e%2e/x", "'..'"),
        ("s3a://bucket/landing/dir/", "folder"),
        ("s3a://bucket/landing/a%0Ab", "control"),
        ("s3a://bucket/landing/[0-9]", "glob"),
        ("s3a://bucket/landing/12:00", "HADOOP-3257"),
        ("s3a://bucket/landing/_SUCCESS", "hidden"),
        ("s3a://bucket/landing/.part-0.crc", "hidden"),
        ("s3a://user@bucket/landing/x", "bucket"),
        ("s3a://bucket/" + "k" * 1025, "1024"),
        ("file:///lake/t/data/%231", "object_store"),
        ("file:///lake/t/data/a%2312", "object_store"),
    ],
)
def test_refused_with_a_reason(bad: str, why: str) -> None:
    with pytest.raises(UnsafePathError, match=why.replace("[", r"\[").replace("?", r"\?")):
        normalize_uri(bad)


def test_hash_digit_names_are_refused_only_on_local_disks() -> None:
    assert normalize_uri("s3a://bucket/landing/a%231") == "s3a://bucket/landing/a%231"  # S3 stores it as is
    assert normalize_uri("file:///lake/t/%2312/a") == "file:///lake/t/%2312/a"  # a folder, not the file name
    assert normalize_uri("file:///lake/t/a%231%232") == "file:///lake/t/a%231%232"  # '1#2' is not all digits


def test_root_prefix_and_table_forms() -> None:
    assert root_prefix("s3://lake") == "s3a://lake/"
    assert root_prefix("s3://lake/my tables/t/") == "s3a://lake/my%20tables/t/"
    assert root_prefix("/var/lake/t") == "file:///var/lake/t/"
    assert not is_under("s3a://lake/my%20tablesX/t", ["s3://lake/my tables/"])


@settings(max_examples=500, deadline=None)
@given(KEYS)
def test_what_the_sidecar_sends_comes_back_unchanged(key: str) -> None:
    """The sidecar's encoding is the canonical one: an accepted path is answered exactly as sent."""
    from sidecar.storage import S3Lister

    sent = S3Lister("bucket", client=object()).uri(f"landing/{key}")
    loc = _accepted(sent)
    assert loc is None or loc.uri == sent


@settings(max_examples=500)
@given(
    st.sampled_from(["s3a://", "file:///", "file://", "S3A://", "s3://", ""]),
    st.text(alphabet="ab/:@[]?#%. 1", max_size=24),
)
def test_the_fast_split_is_urlsplit(prefix: str, rest: str) -> None:
    """The canonical forms' shortcut gives what urlsplit gives, for those forms and near misses."""
    from urllib.parse import urlsplit

    from commit_service.domain.paths import _split

    text = prefix + rest
    try:
        expected = urlsplit(text)
    except ValueError:  # urlsplit refuses some brackets: so must the shortcut (by falling back)
        with pytest.raises(ValueError):
            _split(text)
        return
    assert _split(text) == expected
