"""The commit service: the one writer of each table, committing the sinks' files once per round.

Its rooms (each a subpackage whose ``__init__`` says what it holds) and who may import whom
(``tests/unit/project/test_layers.py`` holds the rules):

- ``domain/``: pure decisions, no I/O (a table's buffer and rounds, leases, failures, schemas,
  file content, paths, the pure half of upserts);
- ``ports.py``: the seams the core calls (``Committer``, ``CommitListener``, ``DeadLetterStore``,
  ``ConnectGroups``);
- ``coordination/``: the coordinator and each table's rounds, quarantine, fencing;
- ``storage/``: reading the sinks' files and their facts, ahead of the rounds;
- ``round/``: a round whatever the format: the one commit skeleton (``round/commit.py``, each
  format's narrow adapter under it) and a round's files read as one frame;
- ``spark/``: the process's one SparkSession and Spark's plumbing (job labels, UI events, JVM errors);
- ``delta/`` / ``iceberg/``: everything that talks to Delta / Iceberg, behind the ``Committer`` port;
- ``http/``: the Flask app, its API, the status page; ``observe/``: metrics and lag;
  ``serving/``: gunicorn's options and worker;
- ``config/``, ``errors.py``, ``cli.py``: the config (a module per section), the error tree, the entry point;
  ``faults.py``: the chaos run's crash points around a commit (test only).

The life of a manifest, one file per step::

    sidecar --POST /v1/manifests--> http/intake.py               ManifestRoute: parse, check, answer 202
                                    coordination/coordinator.py  Coordinator.submit: route, fence
                                    coordination/table_coordinator.py  TableCoordinator.offer
                                    domain/state.py              TableState.offer: buffered
    commit loop (coordinator.tick)  coordination/table_coordinator.py  maybe_commit: a round fires
                                    domain/state.py              TableState.plan -> CommitPlan (domain/plan.py)
                                    delta/deferred.py            DeferredCommitter: Spark when needed
                                    round/commit.py              RoundCommit.commit: the one skeleton
                                    delta/committer.py           DeltaCommitter: Delta's half, one transaction
                                    delta/append.py | delta/upsert.py  the round's files as actions
                                    (an Iceberg table: iceberg/committer.py, one snapshot per round;
                                    iceberg/upsert.py the row delta of an upsert round)
                                    domain/state.py              TableState.committed_plan: manifest done
    sidecar --GET /v1/manifests/<id>--> http/api.py              the manifest's state and version
"""
