"""``lakegate-service``: validate the config, then serve the app under gunicorn.

gunicorn runs ONE worker process (the single writer holding the SparkSession) with
``server.threads`` request threads; :mod:`commit_service.serving.options` holds its options. The app is
built inside the worker, after the fork, so the JVM is never forked. ``--check-config`` validates
and prints the effective config, then exits.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from commit_service.config import ServiceConfig, load_config
from commit_service.errors import ConfigError
from lakegate_core.logsetup import setup_logging


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lakegate-service",
        description="Lakegate commit service: buffers manifests of Kafka Connect storage-sink files "
        "and commits them into Delta tables atomically, exactly once, with the Kafka offsets in "
        "the same commit. Runs under gunicorn with one worker process holding a SparkSession.",
        epilog="Environment variables LAKEGATE_<SECTION>__<KEY> override config keys, e.g. "
        "LAKEGATE_SERVER__PORT=8081; ${NAME} in the file reads the environment. "
        "See docs/configuration.md.",
    )
    parser.add_argument(
        "--config", type=Path, metavar="PATH", help="service YAML config; without it an embedded local default is used"
    )
    parser.add_argument(
        "--check-config", action="store_true", help="validate the config, print it (tokens masked) and exit"
    )
    return parser


def masked(config: ServiceConfig) -> dict[str, Any]:
    d = asdict(config)
    for t in d["auth"]["tokens"]:
        t["token"] = t["token"][:4] + "…"
    if d["storage"]["s3"] and d["storage"]["s3"].get("secret_key"):
        d["storage"]["s3"]["secret_key"] = "…"
    return d


def serve(config: ServiceConfig) -> None:
    from commit_service.http.app import create_app
    from commit_service.serving.options import gunicorn_options, run

    def load() -> Any:
        setup_logging(config.server.log_format)
        return create_app(config)

    run(gunicorn_options(config.server), load)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"lakegate-service: config error: {exc}", file=sys.stderr)
        return 2
    if args.check_config:
        print(json.dumps(masked(config), indent=2, default=str))
        return 0
    setup_logging(config.server.log_format)
    logging.getLogger(__name__).info(
        "lakegate-service on %s:%d, %d table(s): %s",
        config.server.host,
        config.server.port,
        len(config.tables),
        ", ".join(f"{t.name} -> {t.path}" for t in config.tables),
    )
    serve(config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
