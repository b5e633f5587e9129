"""Unit tests of commit_service.coordination, over fakes of the ports."""
