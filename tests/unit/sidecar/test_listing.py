"""Listing each partition from its offset (``sidecar.listing.ListingPlan``): the same files as a
full listing from the offset on, at a cost that does not grow with the archive, and a full listing
wherever names do not sort by offset."""

from __future__ import annotations

from collections.abc import Iterable

from hypothesis import given, settings
from hypothesis import strategies as st

from lakegate_core.sink_config import ConfluentLayout
from lakegate_core.types import TopicPartition
from sidecar.listing import WINDOW, ListingPlan
from sidecar.storage import NamePattern, list_files

TP0, TP1 = TopicPartition("orders", 0), TopicPartition("orders", 1)


class CountingLister:
    """A bucket of (key, size) pairs in key order, as S3 lists them; counts keys answered."""

    def __init__(self, keys: Iterable[str]) -> None:
        self.keys = sorted(keys)
        self.answered = 0
        self.read = 0  # keys a store that reads a prefix from its first key up to StartAfter reads
        self.calls: list[tuple[str, str | None]] = []

    def list(self, prefix: str, start_after: str | None = None, page: int | None = None) -> Iterable[tuple[str, int]]:
        self.calls.append((prefix, start_after))
        for k in self.keys:
            self.read += k.startswith(prefix) and start_after is not None and k <= start_after
            if k.startswith(prefix) and (start_after is None or k > start_after):
                self.answered += 1
                yield k, 10

    def uri(self, key: str) -> str:
        return key


def aiven(tp: TopicPartition, start: int, width: int = 20, ext: str = ".gz") -> str:
    return f"landing/{tp.topic}-{tp.partition}-{start:0{width}d}{ext}"


def starts(listed: dict[TopicPartition, list]) -> dict[TopicPartition, list[int]]:  # type: ignore[type-arg]
    return {tp: [f.start_offset for f in files] for tp, files in listed.items()}


def test_a_steady_round_lists_only_the_files_past_the_offset() -> None:
    archive = [aiven(TP0, i * 10) for i in range(5_000)] + [aiven(TP1, i * 10) for i in range(5_000)]
    lister = CountingLister(archive)
    plan = ListingPlan(NamePattern("aiven", "landing/"))
    since = {TP0: 49_900, TP1: 49_950}
    upto = {TP0: 50_000, TP1: 50_000}
    first = plan.files(lister, since, upto=upto)
    assert lister.calls == [("landing/orders-0-", None), ("landing/orders-1-", None)], (
        "the first round probes each partition from its first name (the names' width is not known yet)"
    )
    assert not plan.cut, "each partition's window holds what is past its offset: nothing was cut"
    lister.answered, lister.calls = 0, []
    again = plan.files(lister, since, upto=upto)
    assert starts(again) == {TP0: list(range(49_900, 50_000, 10)), TP1: list(range(49_950, 50_000, 10))}
    from_offset = {tp: [s for s in ss if s >= since[tp]] for tp, ss in starts(first).items()}
    assert from_offset == starts(again), "the same files as the full listing, from the offset on"
    assert lister.answered == 15 and [c[0] for c in lister.calls] == ["landing/orders-0-", "landing/orders-1-"]
    assert lister.calls[0][1] == "landing/orders-0-" + f"{49_899:020d}"


def test_a_steady_round_lists_by_the_digits_its_offsets_share_where_the_config_gives_the_width() -> None:
    """From the table's offset to Connect's, every name shares its leading digits: a store that
    reads a prefix from its first key (SeaweedFS) reads those few, not the partition's archive."""
    archive = [aiven(TP0, i * 10) for i in range(5_000)]
    since, upto = {TP0: 49_900}, {TP0: 50_000}
    plan = ListingPlan(NamePattern("aiven", "landing/"))
    plan.follow(["orders"], 20)
    lister = CountingLister(archive)
    plan.files(lister, since, upto=upto)  # the first round's probe learns the width
    lister.calls, lister.read = [], 0
    listed = plan.files(lister, since, upto=upto)
    assert starts(listed) == {TP0: list(range(49_900, 50_000, 10))}
    assert lister.calls == [("landing/orders-0-" + "0" * 15 + "499", "landing/orders-0-" + f"{49_899:020d}")]
    assert lister.read == 0 and plan.requests == 2, "one request a round; no key below the offset read"

    gap = CountingLister([k for k in archive if k != aiven(TP0, 49_900)])
    listed = plan.files(gap, since, upto=upto)
    assert [c[0] for c in gap.calls] == ["landing/orders-0-" + "0" * 15 + "499", "landing/orders-0-"], (
        "the file the offset says comes next is not under the narrowed prefix: the partition's prefix"
    )
    assert starts(listed) == {TP0: list(range(49_910, 50_000, 10))}

    # the sink now pads to 25: its new names sort before the offset's name of 20 digits
    wider = CountingLister([k for k in archive if k < aiven(TP0, 49_950)] + [aiven(TP0, 49_950, 25)])
    plan.follow(["orders"], 25)
    listed = plan.files(wider, since, upto=upto)
    assert wider.calls == [("landing/orders-0-", None)], "the config's width is not the names': listed whole"
    assert starts(listed)[TP0][-2:] == [49_940, 49_950], "the name of the new width is found"
    wider.calls = []
    plan.files(wider, since, upto=upto)
    assert wider.calls == [("landing/orders-", None)], "names of two widths: the topic's whole prefix from then on"
    for told in (None, 20):
        plan = ListingPlan(NamePattern("aiven", "landing/"))
        plan.follow(["orders"], told)
        plan.follow(["orders"], None)  # a connector whose config no longer says
        lister = CountingLister(archive)
        plan.files(lister, since, upto=upto)
        lister.calls = []
        plan.files(lister, since, upto=upto)
        assert lister.calls == [("landing/orders-0-", "landing/orders-0-" + f"{49_899:020d}")]


def test_names_that_do_not_sort_keep_the_full_listing() -> None:
    unpadded = [f"landing/orders-0-{i * 10}" for i in range(3_000)]
    lister = CountingLister(unpadded)
    plan = ListingPlan(NamePattern("aiven", "landing/"))
    for _ in range(3):
        plan.files(lister, {TP0: 29_000})
    assert lister.calls[0] == ("landing/orders-0-", None), "the first round's probe of the partition"
    assert all(after is None and prefix == "landing/orders-" for prefix, after in lister.calls[1:])
    custom = ListingPlan(NamePattern({"regex": r"(?P<topic>[a-z]+)/(?P<partition>\d+)/(?P<start_offset>\d+)"}))
    keys = CountingLister([f"orders/0/{i:010d}" for i in range(3_000)])
    for _ in range(3):
        custom.files(keys, {TP0: 2_990})
    assert all(after is None for _, after in keys.calls), "a custom regex has no partition prefix"


def test_a_small_topic_stays_on_the_full_listing_and_a_width_change_falls_back() -> None:
    small = CountingLister([aiven(TP0, i) for i in range(15)])
    plan = ListingPlan(NamePattern("aiven", "landing/"))
    for _ in range(3):
        plan.files(small, {TP0: 10})
    assert len(small.calls) == 3 and all(after is None for _, after in small.calls), "a few keys: cheaper whole"
    grown = CountingLister([f"topics/orders/partition=0/orders+0+{i * 5:010d}" for i in range(2_500)])
    plan = ListingPlan(NamePattern("confluent"))
    plan.files(grown, {TP0: 12_000}, upto={TP0: 12_400})
    grown.calls = []
    plan.files(grown, {TP0: 12_000}, upto={TP0: 12_400})
    assert grown.calls[0][1] is not None, "from the offset"
    grown.calls = []
    plan.files(grown, {TP0: 12_000}, upto={TP0: 10_000_000_000})  # Confluent writes 11 digits past 10**10 - 1
    assert grown.calls == [("topics/orders/partition=0/orders+0+", None)], "a longer name may sort before: whole"


def test_a_confluent_layout_is_listed_per_partition_directory() -> None:
    keys = [f"topics/orders/partition=0/orders+0+{i * 5:010d}.avro" for i in range(2_100)]
    lister = CountingLister(keys)
    plan = ListingPlan(NamePattern("confluent"))
    plan.files(lister, {TP0: 10_000}, upto={TP0: 10_500})
    lister.calls = []
    listed = plan.files(lister, {TP0: 10_000}, upto={TP0: 10_500})
    prefix = "topics/orders/partition=0/orders+0+"
    assert lister.calls == [(prefix, f"{prefix}{9_999:010d}")]
    assert starts(listed)[TP0][0] == 10_000


def test_a_time_based_layout_is_listed_whole_where_its_connectors_topics_dir_says() -> None:
    hourly = ConfluentLayout.of(
        {
            "format.class": "io.confluent.connect.s3.format.avro.AvroFormat",
            "topics.dir": "archive/raw",
            "partitioner.class": "io.confluent.connect.storage.partitioner.HourlyPartitioner",
        }
    )
    assert hourly is not None
    # an hour's directory holds both partitions' files; the hours interleave their offsets
    keys = [
        f"archive/raw/orders/year=2026/month=01/day=01/hour={h:02d}/orders+{p}+{h * 10 + p:010d}.avro"
        for h in range(30)
        for p in (0, 1)
    ]
    lister = CountingLister([*keys, "archive/raw/payments/year=2026/payments+0+0000000000.avro"])
    pattern = NamePattern("confluent")
    assert ListingPlan(pattern).files(lister, {TP0: 100}) == {}, "not followed: Confluent's default topics.dir"
    pattern.follow(["orders"], hourly)
    plan = ListingPlan(pattern)
    for _ in range(2):
        lister.calls = []
        listed = plan.files(lister, {TP0: 100, TP1: 0}, upto={TP0: 300, TP1: 300})
        assert lister.calls == [("archive/raw/orders/", None)], "a partition has no directory of its own"
    assert starts(listed)[TP0] == list(range(90, 300, 10)), "from the last file below the offset"
    assert starts(listed)[TP1] == list(range(1, 300, 10))


@settings(max_examples=200, deadline=None)
@given(
    files=st.dictionaries(st.sampled_from([0, 1, 2]), st.sets(st.integers(0, 5_000), min_size=0, max_size=40)),
    offsets=st.lists(st.integers(0, 5_100), min_size=3, max_size=3),
    uptos=st.lists(st.integers(0, 5_100), min_size=3, max_size=3),
    width_told=st.sampled_from([None, 20, 10]),
    rounds=st.integers(2, 4),
)
def test_per_partition_listing_finds_every_file_a_full_listing_finds_from_the_offset(
    files: dict[int, set[int]], offsets: list[int], uptos: list[int], width_told: int | None, rounds: int
) -> None:
    """Every file starting from the offset up to Connect's offset, whatever the prefix the round
    lists by (the partition's, or narrowed to its offsets' shared digits where the config's width
    is the names')."""
    keys = [aiven(TopicPartition("orders", p), s) for p, ss in files.items() for s in ss]
    keys += [aiven(TopicPartition("orders", 9), i) for i in range(1_500)]  # another worker's: pages to skip
    since = {TopicPartition("orders", p): offsets[p] for p in range(3)}
    upto = {TopicPartition("orders", p): uptos[p] for p in range(3)}
    pattern = NamePattern("aiven", "landing/")
    full = list_files(CountingLister(keys), pattern, ["orders"], since)
    plan = ListingPlan(pattern)
    plan.follow(["orders"], width_told)
    for _ in range(rounds):
        listed = plan.files(CountingLister(keys), since, upto=upto)
        for tp in since:
            wanted = range(since[tp], upto[tp])
            want = [f.start_offset for f in full.get(tp, []) if f.start_offset in wanted]
            got = [f.start_offset for f in listed.get(tp, []) if f.start_offset in wanted]
            assert got == want


def test_an_archive_is_listed_a_window_at_a_time() -> None:
    """A partition of 1,000 files listed alone: a round lists its first WINDOW files (and one more,
    which says where the window stops), not the archive; the next round, from where the service
    holds files, the next window."""
    archive = [aiven(tp, i * 10) for tp in (TP0, TP1) for i in range(1_000)]
    lister = CountingLister(archive)
    plan = ListingPlan(NamePattern("aiven", "landing/"))
    upto = {TP0: 10_000, TP1: 10_000}
    first = plan.files(lister, {TP0: 0, TP1: 0}, upto=upto)
    assert starts(first) == {tp: [i * 10 for i in range(WINDOW)] for tp in (TP0, TP1)}
    assert plan.cut == {TP0: WINDOW * 10, TP1: WINDOW * 10}
    assert lister.answered == 2 * (WINDOW + 1), "the listing stops past the window"
    lister.answered, lister.calls = 0, []
    second = plan.files(lister, {TP0: WINDOW * 10, TP1: 5_000}, upto=upto)
    assert starts(second)[TP0] == [i * 10 for i in range(WINDOW, 2 * WINDOW)]
    assert starts(second)[TP1] == [i * 10 for i in range(500, 500 + WINDOW)]
    assert lister.calls[0] == ("landing/orders-0-", "landing/orders-0-" + f"{WINDOW * 10 - 1:020d}")
    last = plan.files(lister, {TP0: 9_000, TP1: 9_990}, upto=upto)
    assert starts(last) == {TP0: [i * 10 for i in range(900, 1_000)], TP1: [9_990]} and not plan.cut


def test_a_window_is_kept_only_where_names_sort_by_offset() -> None:
    """Unpadded names: the first WINDOW names in key order are not the first WINDOW offsets (``-10``
    sorts before ``-2``), so the partition is listed whole, and nothing is cut."""
    lister = CountingLister([f"landing/orders-0-{i}" for i in range(WINDOW * 3)])
    plan = ListingPlan(NamePattern("aiven", "landing/"))
    listed = plan.files(lister, {TP0: 0}, upto={TP0: WINDOW * 3})
    assert starts(listed) == {TP0: list(range(WINDOW * 3))} and not plan.cut
