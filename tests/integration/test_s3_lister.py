"""The sidecar's S3 lister against the real S3-compatible server: pagination, odd keys, errors."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from lakegate_core.types import TopicPartition
from lakegate_stack import s3 as s3mod
from lakegate_stack.process import free_port
from lakegate_stack.s3 import S3Server
from sidecar.errors import SourceError
from sidecar.listing import WINDOW, ListingPlan
from sidecar.storage import NamePattern, S3Lister, list_files

BUCKET = "lister"
# Names the sinks write, and names a user's topics can give them: spaces, '+', '=', non-ASCII.
ODD = {
    "landing/odd topic-0-00000000000000000007": 7,
    "landing/ünï-côdé-2-12.gz": 12,
    "landing/a+b=c-1-3.jsonl": 3,
    "landing/not-a-data-file.txt": 0,
}


@pytest.fixture()
def lister(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Lister:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3mod.ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3mod.SECRET_KEY)
    return S3Lister(BUCKET, endpoint=s3_server.endpoint, region=s3mod.REGION)


@pytest.fixture(scope="module")
def landed(s3_server: S3Server) -> dict[str, int]:
    """1,204 objects (more than one ListObjectsV2 page): 1,200 of topic 'orders', the odd ones."""
    client = s3_server.client()
    client.create_bucket(Bucket=BUCKET)
    keys = {f"landing/orders-{p}-{start:020d}": start % 97 for p in range(3) for start in range(0, 400 * 5, 5)}
    keys.update(ODD)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda kv: client.put_object(Bucket=BUCKET, Key=kv[0], Body=b"x" * kv[1]), keys.items()))
    return keys


def test_lists_every_page_with_sizes_and_times(lister: S3Lister, landed: dict[str, int], s3_server: S3Server) -> None:
    listed = list(lister.list("landing/"))
    assert {k: size for k, size, _ in listed} == landed
    assert {k: size for k, size, _ in lister.list("landing/orders-1-")} == {
        k: v for k, v in landed.items() if "/orders-1-" in k
    }
    # each object's LastModified, as a HEAD gives it: the service takes it instead of a stat of its own
    client = s3_server.client()
    for key, _, modified_ms in listed[:: len(listed) // 5]:
        head = client.head_object(Bucket=BUCKET, Key=key)
        assert modified_ms == int(head["LastModified"].timestamp() * 1000)


def test_a_partition_is_listed_from_its_offset_on_the_real_server(lister: S3Lister, landed: dict[str, int]) -> None:
    """S3's StartAfter through the sidecar's lister, and the listing plan using it: the second
    round lists each partition from its offset and finds what the full listing found there."""
    after = "landing/orders-1-" + f"{1_500:020d}"
    assert [k for k, _, _ in lister.list("landing/orders-1-", start_after=after)] == [
        f"landing/orders-1-{s:020d}" for s in range(1_505, 2_000, 5)
    ]
    since = {TopicPartition("orders", 1): 1_990}  # 1,200 keys of the topic: more than 20 per partition listed
    plan = ListingPlan(NamePattern("aiven", "landing/"))
    probe = plan.files(lister, since, upto={TopicPartition("orders", 1): 2_000})
    per_partition = plan.files(lister, since, upto={TopicPartition("orders", 1): 2_000})
    assert plan.requests == 2, "the first round's probe of the partition from its first name, then from its offset"
    for tp in since:
        assert [f.start_offset for f in per_partition[tp]] == [f.start_offset for f in probe[tp]] == [1_990, 1_995]
    window = plan.files(lister, {TopicPartition("orders", 1): 0}, upto={TopicPartition("orders", 1): 2_000})
    assert [f.start_offset for f in window[TopicPartition("orders", 1)]] == list(range(0, 5 * WINDOW, 5))
    assert plan.cut == {TopicPartition("orders", 1): 5 * WINDOW}, "a window of the partition, in pages of its size"


def test_odd_keys_come_back_exactly_and_parse(lister: S3Lister, landed: dict[str, int]) -> None:
    found = list_files(lister, NamePattern("aiven", "landing/"), ["odd topic", "ünï-côdé", "a+b=c", "orders"])
    assert [(f.key, f.start_offset) for f in found[TopicPartition("odd topic", 0)]] == [
        ("landing/odd topic-0-00000000000000000007", 7)
    ]
    assert [f.key for f in found[TopicPartition("ünï-côdé", 2)]] == ["landing/ünï-côdé-2-12.gz"]
    assert [f.size for f in found[TopicPartition("a+b=c", 1)]] == [3]
    starts = [f.start_offset for f in found[TopicPartition("orders", 2)]]
    assert starts == list(range(0, 2000, 5))
    assert lister.uri("landing/odd topic-0-7") == f"s3a://{BUCKET}/landing/odd%20topic-0-7"


def test_missing_bucket_is_a_source_error(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3mod.ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3mod.SECRET_KEY)
    with pytest.raises(SourceError, match="s3://no-such-bucket/x"):
        list(S3Lister("no-such-bucket", endpoint=s3_server.endpoint).list("x"))


def test_unreachable_store_is_a_source_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3mod.ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3mod.SECRET_KEY)
    closed = f"http://127.0.0.1:{free_port('127.0.0.1')}"
    with pytest.raises(SourceError, match=f"s3://{BUCKET}/landing/"):
        list(S3Lister(BUCKET, endpoint=closed).list("landing/"))
