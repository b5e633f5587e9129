"""Unit tests of the commit service, one folder per area of commit_service."""
