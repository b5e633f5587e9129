"""Lakegate's benchmarks: each prints progress and its figures, and writes JSON (and plots) under
``.lakegate/bench/``; docs/performance.md gives today's figures and the command for each.

``python -m lakegate_bench <command> [options]`` (through the ``scripts/bench*`` wrappers, which
install what the command needs first; ``--help`` on any of them prints at once and installs nothing):

- ``run`` (``scripts/bench``): the commit path's parts in one run, ``--parts`` of ``commit``,
  ``checkpoints``, ``history``, ``jsonl``, ``intake``, ``http``, ``pipeline``, ``upsert``; a part's
  name is also a command (``python -m lakegate_bench commit`` = ``run --parts commit``).
  Modules: ``run`` (the command), ``commit_path`` (the in-process parts), ``http_load``,
  ``pipeline`` and ``spark_streaming`` (its peer), ``upsert``, ``report`` (tables and plots);
  ``pipeline`` and ``iceberg_peer`` share ``freshness`` (records produced, a poller seeing them),
  ``figures`` (a run's result row), ``process_cpu`` (CPU from ``/proc``) and ``s3_requests``;
- ``audit``, ``intake``, ``log-listing``, ``maintenance``, ``recovery``, ``s3-commit``, ``sidecar``,
  ``slowclients``: one module each (``scripts/bench-<command>``);
- ``result``: how the standalone commands print and write their JSON.
"""
