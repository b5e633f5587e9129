"""``LogEnds`` (the status page's Kafka log ends) against a real broker: kafka-python's consumer
answers per partition the next offset a record gets; a partition of a topic that does not exist
is an error the page shows, not an exception."""

from __future__ import annotations

from commit_service.observe.lag import LogEnds
from lakegate_core.connect_group import KafkaSettings
from lakegate_core.types import TopicPartition
from lakegate_stack.kafka import KafkaBroker, create_topic
from tests.kafka_helpers import produce_json


def test_log_ends_are_the_produced_counts_per_partition(kafka_broker: KafkaBroker) -> None:
    topic = "log-ends"
    create_topic(kafka_broker.bootstrap_servers, topic, 3)
    records = [(p, f"k{p}-{i}", {"i": i}) for p in range(3) for i in range(5 * (p + 1))]
    assert produce_json(kafka_broker.bootstrap_servers, topic, records) == 30
    ends = LogEnds.for_kafka(KafkaSettings(kafka_broker.bootstrap_servers))
    try:
        reading = ends.read([TopicPartition(topic, p) for p in range(3)])
        assert reading.error is None
        assert dict(reading.offsets) == {TopicPartition(topic, p): 5 * (p + 1) for p in range(3)}
        missing = ends.read([TopicPartition("no-such-topic-here", 0)])
        assert missing.error is not None and not missing.offsets
        again = ends.read([TopicPartition(topic, 0)])  # a new consumer after the failed read
        assert again.error is None and dict(again.offsets) == {TopicPartition(topic, 0): 5}
    finally:
        ends.close()
