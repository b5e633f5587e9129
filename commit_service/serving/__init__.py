"""How ``lakegate-service`` runs the app: gunicorn (the only package that imports it).

- ``options``: every gunicorn option the service sets, and ``run``;
- ``worker``: the gthread worker that reads request bodies with a deadline (slow clients).
"""
