"""One call to the commit service's HTTP API, as the operator's tools make it: the JSON answer, or
an :class:`ApiCallError` saying what went wrong in one line (the service's error code and message)."""

from __future__ import annotations

from typing import Any

import requests


class ApiCallError(Exception):
    """The service did not answer (unreachable, or an error status)."""


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
