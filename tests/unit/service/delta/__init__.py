"""Unit tests of commit_service.delta that need no JVM."""
