"""Lakegate's shared kernel: what the commit service and the sidecar both speak and use.

Standard library plus pyyaml (config files) only; kafka-python is imported lazily by
:mod:`lakegate_core.connect_group` when a Kafka client is first made. ``commit_service`` and
``sidecar`` import this package and never each other.

- :mod:`~lakegate_core.types` — ``TopicPartition``, ``PartitionOffsets``
- :mod:`~lakegate_core.wire` — field readers and the one JSON encoder of the wire types
- :mod:`~lakegate_core.protocol` — intake and lease messages (sidecar -> service)
- :mod:`~lakegate_core.status` — the read side (tables, commits, manifest status, errors)
- :mod:`~lakegate_core.errors` — the base of the error tree
- :mod:`~lakegate_core.configfile` — YAML + environment into frozen dataclasses
- :mod:`~lakegate_core.connect_group` — a Connect sink's consumer group, read from Kafka
- :mod:`~lakegate_core.logsetup` — text or JSON logs
- :mod:`~lakegate_core.cache` — the cache and jar directories
"""
