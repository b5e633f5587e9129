"""The sidecar's HTTP sessions (the commit service's, Connect's REST API): the environment read once.

A ``requests.Session`` reads the environment on every request: the proxy variables with
``NO_PROXY``, the CA bundle variables and ``~/.netrc``. The sidecar sends several requests a
second to the same two addresses, and that reading was about a seventh of its CPU (py-spy, the
pipeline benchmark). :func:`session_for` reads the same settings once, for the one address the
session talks to, and turns the per-request reading off: a proxy, a CA bundle or a ``.netrc``
entry applies as it did, read when the sidecar starts.
"""

from __future__ import annotations

import os

import requests

CA_BUNDLE_VARIABLES = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")  # requests' own order


def session_for(url: str) -> requests.Session:
    """A session for requests to ``url``'s host, with the proxy, CA bundle and ``.netrc`` login
    the environment gives for it now."""
    session = requests.Session()
    session.proxies.update(requests.utils.get_environ_proxies(url))
    bundle = next((os.environ[v] for v in CA_BUNDLE_VARIABLES if os.environ.get(v)), None)
    if bundle is not None:
        session.verify = bundle
    login = requests.utils.get_netrc_auth(url)
    if login is not None:
        session.auth = login
    session.trust_env = False
    return session
