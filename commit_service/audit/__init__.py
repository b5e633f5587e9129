"""The audit: does a table hold every record Kafka gave it, once, with its values?

Run by ``GET /v1/tables/{table}/audit`` (and so by the ``lakegate-audit`` console script), on the
HTTP thread that asked; read-only. Its parts:

- ``ledger``: pure. The table's history as the table format keeps it (:class:`~.ledger.TableHistory`,
  read by each format's committer) becomes each partition's committed ranges and the findings of
  the history itself (ranges skipped, committed twice, offsets going back, foreign rows, row counts,
  data files outside their commit's ranges, offsets held more often than committed);
- ``values``: pure. A Kafka record as the row the sink and the service make of it, and the
  field-by-field comparison of the two;
- ``sample``: pure. The seeded choice of the records the value audit reads back;
- ``kafka``: the only I/O of its own: Kafka's log bounds and records (kafka-python);
- ``auditor``: puts them together for one table and writes the :class:`~lakegate_core.audit.AuditReport`.

The table's rows are read through the port :class:`commit_service.ports.TableLedger`, which each
table format implements (``delta.ledger``, ``iceberg.ledger``).
"""
