"""Unit tests of commit_service.serving: gunicorn's options and worker."""
