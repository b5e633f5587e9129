"""``lakegate-sidecar``: the command that runs beside each Kafka Connect worker.

Following Connect and streaming manifests comes with the sidecar issue; until then the command
parses its options and says plainly that it cannot run yet.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lakegate-sidecar",
        description="Lakegate sidecar: follows this Kafka Connect worker's sink tasks, finds the data "
        "files Connect has committed, and sends their manifests to the Lakegate commit service.",
        epilog="Environment variables LAKEGATE_SIDECAR_<KEY> override config keys. "
        "See docs/configuration.md.",
    )
    parser.add_argument("--config", type=Path, metavar="PATH", required=False,
                        help="sidecar YAML config (connect, kafka, storage, service sections)")  # fmt: skip
    return parser


def main(argv: list[str] | None = None) -> int:
    build_parser().parse_args(argv)
    print("lakegate-sidecar: following Connect is not implemented yet (sidecar issue); "
          "only --help works in this version", file=sys.stderr)  # fmt: skip
    return 2


if __name__ == "__main__":
    sys.exit(main())
