"""``lakegate-service``: the command operators run to start the commit service.

The HTTP API, the coordinator and the Delta commit path come with the commit-service issue; until
then the command parses its options and says plainly that serving is not available yet.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lakegate-service",
        description="Lakegate commit service: buffers manifests of Kafka Connect storage-sink files "
        "and commits them into Delta tables atomically, exactly once, with the Kafka offsets in "
        "the same commit. Runs under gunicorn with one worker process holding a SparkSession.",
        epilog="Environment variables LAKEGATE_<SECTION>__<KEY> override config keys, e.g. "
        "LAKEGATE_SERVER__PORT=8081. See docs/configuration.md.",
    )
    parser.add_argument("--config", type=Path, metavar="PATH",
                        help="service YAML config; without it an embedded local default is used")  # fmt: skip
    return parser


def main(argv: list[str] | None = None) -> int:
    build_parser().parse_args(argv)
    print("lakegate-service: serving is not implemented yet (commit-service issue); "
          "only --help works in this version", file=sys.stderr)  # fmt: skip
    return 2


if __name__ == "__main__":
    sys.exit(main())
