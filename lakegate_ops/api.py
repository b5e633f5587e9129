"""How the operator's tools reach the commit service's HTTP API: their ``--service`` and ``--token``
arguments, a session sending the token, and one call: the JSON answer, or
an :class:`ApiCallError` saying what went wrong in one line (the service's error code and message)."""

from __future__ import annotations

import argparse
import os
from typing import Any

import requests


class ApiCallError(Exception):
    """The service did not answer (unreachable, or an error status)."""


def add_service_arguments(parser: argparse.ArgumentParser) -> None:
    """``--service`` and ``--token``, as every operator's tool takes them (defaults from the environment)."""
    parser.add_argument(
        "--service",
        default=os.environ.get("LAKEGATE_SERVICE_URL", "http://localhost:8080"),
        help="the commit service's URL (default: $LAKEGATE_SERVICE_URL or http://localhost:8080)",
    )
    parser.add_argument(
        "--token", default=os.environ.get("LAKEGATE_TOKEN"), help="a bearer token (default: $LAKEGATE_TOKEN)"
    )


def service_session(token: str | None) -> requests.Session:
    """A session that sends ``token`` as its bearer token."""
    session = requests.Session()
    if token:
        session.headers["Authorization"] = f"Bearer {token}"
    return session


def call(session: requests.Session, method: str, url: str, timeout: float, **kwargs: Any) -> Any:
    """``method url`` with ``kwargs`` (``params``, ``json``); the decoded JSON of a 200."""
    try:
        response = session.request(method, url, timeout=timeout, **kwargs)
    except requests.RequestException as exc:
        raise ApiCallError(f"cannot reach {url}: {exc}") from None
    if response.status_code != 200:
        try:
            error = response.json()["error"]
            why = f"{error['code']}: {error['message']}"
        except (ValueError, KeyError, TypeError):
            why = response.text[:200]
        raise ApiCallError(f"{method} {url} answered {response.status_code} ({why})")
    try:
        return response.json()
    except ValueError:
        raise ApiCallError(f"{method} {url} answered no JSON") from None
