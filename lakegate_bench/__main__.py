"""``python -m lakegate_bench <command> [options]``: see the package docstring (``--help`` lists the commands)."""

from __future__ import annotations

import importlib
import sys

import lakegate_bench

COMMANDS = {
    "run": "run",
    "intake": "intake",
    "log-listing": "log_listing",
    "maintenance": "maintenance",
    "audit": "audit",
    "recovery": "recovery",
    "s3-commit": "s3_commit",
    "sidecar": "sidecar",
    "slowclients": "slowclients",
}
PARTS = (
    "commit",
    "checkpoints",
    "history",
    "jsonl",
    "json",
    "avro",
    "http",
    "pipeline",
    "upsert",
    "iceberg",
    "iceberg-peer",
    "partitioned",
    "merge",
)  # also run's parts


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(lakegate_bench.__doc__)
        print("commands:", ", ".join([*COMMANDS, *PARTS]))
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command in PARTS:
        command, rest = "run", ["--parts", command, *rest]
    if command not in COMMANDS:
        print(
            f"lakegate_bench: unknown command {command!r}; commands: {', '.join([*COMMANDS, *PARTS])}", file=sys.stderr
        )
        return 2
    module = importlib.import_module(f"lakegate_bench.{COMMANDS[command]}")
    result: int = module.main(rest)
    return result


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
