"""Upload limits per tenant (a TOML file, defaults that follow the server's body limit) and the `url` form's
host guard: what server/uploads.py decides before anything is stored."""
from __future__ import annotations

import pytest

from canvas2graph.server.errors import ApiError
from canvas2graph.server.uploads import MB, RAGFLOW_TYPES, UploadLimitsError, UploadPolicy, fetch_url


def write(tmp_path, text: str) -> str:
    path = tmp_path / "limits.toml"
    path.write_text(text)
    return str(path)


def test_without_a_file_every_tenant_gets_the_defaults_and_the_body_limit_per_file():
    policy = UploadPolicy.load(None, max_body_bytes=8 * MB)
    limits = policy.of("anyone")
    assert (limits.max_file_mb, limits.max_files, limits.types) == (8, 10, RAGFLOW_TYPES)
    assert {"pdf", "docx", "xlsx", "csv", "png", "mp3"} <= RAGFLOW_TYPES and "exe" not in RAGFLOW_TYPES


def test_a_tenants_table_overrides_the_files_defaults(tmp_path):
    policy = UploadPolicy.load(write(tmp_path, 'max_files = 2\ntypes = "*"\n[tenants."Acme Corp"]\nmax_file_mb = 64\n'
                                                'types = [".CSV"]\n'), max_body_bytes=16 * MB)
    assert (policy.of("other").max_files, policy.of("other").types, policy.of("other").max_file_mb) == (2, None, 16)
    acme = policy.of("Acme Corp")
    assert (acme.max_files, acme.max_file_mb, acme.types) == (2, 64, frozenset({"csv"}))


@pytest.mark.parametrize("text, words", [
    ("max_files = -1", "max_files must be a whole number"),
    ("max_files = 1.5", "max_files must be a whole number"),
    ("max_file_mb = 'big'", "max_file_mb must be a number"),
    ("types = 'pdf'", "types must be a list of extensions"),
    ("maximum = 3", "unknown key 'maximum'"),
    ("tenants = 3", "`tenants` must be a table"),
    ("[tenants.acme]\nmax_stored_mb = true", "tenants.acme: max_stored_mb must be a number"),
    ("max_files = ", "not valid TOML"),
])
def test_a_broken_limits_file_names_the_file_and_the_key(tmp_path, text, words):
    path = write(tmp_path, text)
    with pytest.raises(UploadLimitsError, match=words) as raised:
        UploadPolicy.load(path)
    assert path in str(raised.value)


def test_a_missing_limits_file_is_an_error_naming_it(tmp_path):
    with pytest.raises(UploadLimitsError, match="cannot read upload limits file"):
        UploadPolicy.load(str(tmp_path / "nope.toml"))


def test_stored_quotas_count_what_is_kept_and_what_comes():
    limits = UploadPolicy.load(None).of("t")
    limits.check_stored((1000, 10 * MB), [MB])                     # no quota: anything goes
    quota = type(limits)(max_stored_files=3, max_stored_mb=1)
    quota.check_stored((2, 0), [10])
    with pytest.raises(ApiError, match="at most 3 files") as raised:
        quota.check_stored((2, 0), [10, 10])
    assert raised.value.status == 413
    with pytest.raises(ApiError, match="at most 1 MB"):
        quota.check_stored((0, MB - 5), [10])


async def test_a_url_on_a_private_host_is_refused_unless_the_operator_allows_it(monkeypatch):
    monkeypatch.delenv("CANVAS2GRAPH_UPLOAD_ALLOW_PRIVATE", raising=False)
    limits = UploadPolicy.load(None).of("t")
    for url in ("http://127.0.0.1:9/x.csv", "http://169.254.169.254/latest/meta-data", "ftp://example.com/a.csv"):
        with pytest.raises(ApiError) as raised:
            await fetch_url(url, limits)
        assert raised.value.status == 400 and "cannot be fetched" in raised.value.message
    assert "CANVAS2GRAPH_UPLOAD_ALLOW_PRIVATE=1" in str((await _refusal(limits)).message)


async def _refusal(limits):
    try:
        await fetch_url("http://10.0.0.1/a.csv", limits)
    except ApiError as e:
        return e
    raise AssertionError("a private host was fetched")
