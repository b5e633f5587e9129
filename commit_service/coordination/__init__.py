"""The coordinator: who decides when each table commits, and keeps the service's promises about it.

Imports the domain, the ports and the config, never Spark, storage or Flask (fakes stand in for
the ports in the unit tests).

- ``coordinator``: every table, routing a manifest's files to them, the commit loop (``tick``);
- ``table_coordinator``: one table's intake, rounds, backoff and maintenance, under its locks;
- ``quarantine``: one table's dead letters (a condemned file's record, retry, release);
- ``fencing``: partition leases checked against Kafka, commits capped at Connect's offsets.
"""
