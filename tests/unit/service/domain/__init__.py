"""Unit tests of commit_service.domain: the pure decisions."""
