"""Unit tests of commit_service.iceberg that need no JVM: what a snapshot summary holds, Iceberg's types."""
