"""Pure decisions, no I/O, no clock, no threads: everything here is unit-tested without Spark,
Kafka, storage or Flask, and imports nothing of the service but ``errors``.

- ``state``: one table's buffer, committed offsets and the decision what may commit (``TableState``);
- ``plan``: what a round is made of (``PendingFile``, ``CommitPolicy``, ``CommitPlan``);
- ``failures``: backoff and which file a run of failures condemns;
- ``leases``: which sidecar may report a partition now;
- ``maintenance``: when compaction, vacuum and checkpoints are due;
- ``round_schema``, ``json_infer``: one schema per round, from each file's shape and the table's;
- ``round_guard``: what a round writes checked against what its files hold;
- ``content``, ``coverage``, ``csv_records``: what a sink's file holds (encodings, envelopes,
  the offsets inside it, Aiven's CSV lines);
- ``paths``: the one path model (parse once, refuse anything unsafe);
- ``history``: a table's history and rows as the audit reads them (``TableHistory``, ``OffsetTally``);
- ``upsert``: the pure half of upsert and CDC tables (the spec, the row image's shape).
"""
