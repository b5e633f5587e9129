"""A round, whatever the table format: the one commit skeleton every round runs through and how a
round's files are read.

- ``commit``: ``RoundCommit``, the skeleton (files checked, offsets against the plan, the Spark
  jobs labelled, the round written and landed between the crash points, errors translated), and
  ``TableFormat``, the narrow adapter Delta's and Iceberg's committers give it;
- ``sources``: a round's files checked against their manifests, the offsets their content holds,
  Spark's schema of each footer;
- ``convert`` / ``conform``: a round's text and enveloped files read as one frame of the round's schema;
- ``changes`` / ``upsert_round``: an upsert round's records as changes, and what it writes.

pyspark is imported inside functions only: nothing here loads it at import time.
"""
