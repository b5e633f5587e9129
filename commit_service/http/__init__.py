"""The service's HTTP face: the Flask app, its API and the status page. The only package that
imports Flask; ``app`` is the composition root that builds a service process.

- ``app``: ``create_app``, the coordinator, committers, metrics and routes of one process;
- ``intake``: ``POST /v1/manifests``, answered before Flask's routing (the sidecars' hot path);
- ``api``: every other ``/v1`` route, and the error handlers (an error's status from the tree);
- ``runtime``: what one process holds, as a Flask extension;
- ``request_body``: a request body past the size cap is a 413, chunked or not;
- ``openapi``: the API's OpenAPI document; ``status_page`` and ``templates/``: ``GET /``.
"""
