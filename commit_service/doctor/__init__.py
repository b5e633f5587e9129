"""The doctor: is each connector feeding a table set up so that exactly once can hold?

Run by ``GET /v1/doctor`` (the connectors the sidecars reported at start) and ``POST /v1/doctor``
(the connectors a sidecar or ``lakegate-doctor --connect`` sends), read-only. The connector
configs come from Connect's REST API through their senders (:mod:`lakegate_core.doctor`); the
service adds what only it knows: its tables and their commit policy, ``storage.allowed_roots``,
the tables' committed offsets, and Kafka. Its parts:

- ``facts``: pure. What one connector is checked on (:class:`~.facts.ConnectorFacts`): its config,
  the tables its topics feed, the topics as Kafka describes them, the offsets;
- ``sink_checks``: pure. What the connector's own config says of its files: names, format, the
  offset field, an upsert table's fields and keys, dropped records, how often files complete, its state;
- ``table_checks``: pure. The connector against the service and Kafka: placement, routing,
  retention, transactions and isolation, offsets gone backwards;
- ``kafka``: the only I/O of its own: topic configs, log ends, and the tail of each log (kafka-python);
- ``doctor``: remembers what the sidecars reported, gathers the facts and writes the
  :class:`~lakegate_core.doctor.DoctorReport`.

docs/operations.md lists every check, what its findings mean and how to fix them.
"""
