"""Unit tests of commit_service.http: the API over a fake committer."""
