"""Unit tests of commit_service.spark that need no JVM (its Spark properties, thread priorities)."""
