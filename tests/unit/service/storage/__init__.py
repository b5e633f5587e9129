"""Unit tests of commit_service.storage."""
