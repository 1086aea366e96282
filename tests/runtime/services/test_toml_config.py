"""Reading a TOML settings file: its tables as a dict, or one clear error naming what the file is and where."""
import pytest

from canvas2graph.runtime.services.toml_config import read_toml


class SettingsError(Exception):
    pass


def test_a_toml_file_reads_as_a_dict(tmp_path):
    path = tmp_path / "settings.toml"
    path.write_text('timeout = 12\n[datasets."kb 1"]\ntenant = "t1"\n', encoding="utf-8")
    assert read_toml(path, "settings file", SettingsError) == {"timeout": 12, "datasets": {"kb 1": {"tenant": "t1"}}}


def test_a_missing_file_is_an_error_naming_it(tmp_path):
    path = tmp_path / "absent.toml"
    with pytest.raises(SettingsError) as e:
        read_toml(path, "settings file", SettingsError)
    assert str(e.value) == f"cannot read settings file {path}: No such file or directory"


def test_a_folder_is_not_a_file_to_read(tmp_path):
    with pytest.raises(SettingsError, match=f"cannot read settings file {tmp_path}: "):
        read_toml(tmp_path, "settings file", SettingsError)


@pytest.mark.parametrize("content", [b"timeout = \n", b"[datasets\n", "timeout = 1\n".encode("utf-16")])
def test_a_file_that_is_not_toml_is_an_error_naming_it(tmp_path, content):
    path = tmp_path / "settings.toml"
    path.write_bytes(content)
    with pytest.raises(SettingsError, match=f"^settings file {path} is not valid TOML: "):
        read_toml(path, "settings file", SettingsError)
