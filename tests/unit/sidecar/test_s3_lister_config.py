"""The sidecar's S3 lister: endpoint checks and the credential chain it signs with (no network)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sidecar.errors import SidecarConfigError
from sidecar.storage import S3Lister, credential_chain

AWS_VARS = ("AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY", "AWS_SECRET_KEY", "AWS_SESSION_TOKEN")


@pytest.mark.parametrize(
    "endpoint",
    ["127.0.0.1:9000", "ftp://store:21", "http://store:9000/base", "http://store:9000?x=1", "https://"],
)
def test_endpoint_must_be_a_bare_http_url(endpoint: str) -> None:
    with pytest.raises(SidecarConfigError, match="storage.endpoint"):
        S3Lister("landing", endpoint=endpoint)


def test_bad_region_is_a_config_error() -> None:
    with pytest.raises(SidecarConfigError, match="region"):
        S3Lister("landing", endpoint="http://store:9000", region="Not A Region!")


def test_good_endpoints_build_a_client() -> None:
    assert S3Lister("landing", endpoint="http://store:9000/").client is not None
    assert S3Lister("landing", endpoint="https://s3.eu-central-1.amazonaws.com", path_style=False).client is not None
    assert S3Lister("landing").client is not None  # AWS


def test_environment_keys_come_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    profile = tmp_path / "credentials"
    profile.write_text("[default]\naws_access_key_id = FROMFILE\naws_secret_access_key = file-secret\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(profile))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "FROMENV")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "env-token")
    got = credential_chain().retrieve()
    assert (got.access_key, got.secret_key, got.session_token) == ("FROMENV", "env-secret", "env-token")


def test_the_profile_of_the_shared_file_is_next(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in AWS_VARS:
        monkeypatch.delenv(name, raising=False)
    profile = tmp_path / "credentials"
    profile.write_text(
        "[default]\naws_access_key_id = DEFAULTKEY\naws_secret_access_key = d\n"
        "[lake]\naws_access_key_id = LAKEKEY\naws_secret_access_key = lake-secret\n"
    )
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(profile))
    monkeypatch.setenv("AWS_PROFILE", "lake")
    got = credential_chain().retrieve()
    assert (got.access_key, got.secret_key) == ("LAKEKEY", "lake-secret")
