"""The operator's command-line tools, clients of the commit service's HTTP API (``requests`` and the
wire types of :mod:`lakegate_core` only; nothing of the service itself):

- ``audit``: ``lakegate-audit``, each table's audit (``GET /v1/tables/{table}/audit``) as a summary
  or JSON, exiting non-zero on any breach;
- ``doctor``: ``lakegate-doctor``, the connectors feeding the tables checked against what exactly
  once needs (``GET``/``POST /v1/doctor``), reading Connect's REST API itself with ``--connect``;
- ``api``: the one HTTP call both make.
"""
