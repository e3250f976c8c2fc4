"""Settings coercion and validation, fingerprints."""

from dataclasses import dataclass, field

import pytest

from curate.stages.errors import SettingsError
from curate.stages.stage import IOSettings, check_range, fingerprint, parse_bytes, settings_from_mapping


@dataclass(frozen=True)
class Example:
    n: int = 3
    ratio: float = 0.5
    flag: bool = False
    names: tuple[str, ...] = ("a",)
    label: str | None = None
    mode: str = field(default="x", metadata={"choices": ("x", "y")})

    def __post_init__(self):
        check_range(self, "ratio", 0, 1)


def test_values_from_yaml_and_cli_strings():
    s = settings_from_mapping(Example, {"n": "5", "ratio": 1, "flag": "yes", "names": "a, b"}, "ex")
    assert s == Example(n=5, ratio=1.0, flag=True, names=("a", "b"))
    assert settings_from_mapping(Example, {"names": ["x"], "label": None}, "ex").names == ("x",)


@pytest.mark.parametrize("values, message", [
    ({"n": "five"}, "ex.n must be an integer; got 'five'"),
    ({"n": True}, "ex.n must be an integer"),
    ({"ratio": 2}, "ex: ratio must be in 0..1; got 2.0"),
    ({"flag": "maybe"}, "ex.flag must be true or false"),
    ({"nope": 1}, "ex: unknown setting 'nope'"),
])
def test_bad_values_name_the_setting(values, message):
    with pytest.raises(SettingsError) as e:
        settings_from_mapping(Example, values, "ex")
    assert message in str(e.value)


def test_io_settings_validation():
    with pytest.raises(SettingsError, match="format must be one of parquet, jsonl; got 'csv'"):
        IOSettings(format="csv")
    with pytest.raises(SettingsError, match="blocksize"):
        IOSettings(blocksize="lots")
    assert parse_bytes("128MiB", "b") == 128 * 1024**2 and parse_bytes("1.5kb", "b") == 1500


def test_fingerprint_changes_with_settings_and_input_only():
    io = IOSettings()
    a = fingerprint("s", Example(), [{"file": "x", "size": 1}], io)
    assert a == fingerprint("s", Example(), [{"file": "x", "size": 1}], IOSettings(allow_incomplete=True))
    assert a != fingerprint("s", Example(), [{"file": "x", "size": 1}], IOSettings(blocksize="1MiB"))
    assert a != fingerprint("s", Example(n=4), [{"file": "x", "size": 1}], io)
    assert a != fingerprint("s", Example(), [{"file": "x", "size": 2}], io)
    assert a != fingerprint("s", Example(), [{"file": "x", "size": 1}], IOSettings(format="jsonl"))


@dataclass(frozen=True)
class WithList:
    urls: str = field(default="", metadata={"input_file": True})


def test_files_named_by_settings_count_as_input(tmp_path):
    from curate.stages.dataset import input_identity
    from curate.stages.stage import settings_files

    listing = tmp_path / "urls.txt"
    listing.write_text("http://a/1\n")
    s = WithList(urls=str(listing))
    assert settings_files(s) == [str(listing)] and settings_files(WithList(urls="s3://x/y")) == []
    before = fingerprint("s", s, input_identity(settings_files(s)), IOSettings())
    listing.write_text("http://a/1\nhttp://a/2\n")
    assert fingerprint("s", s, input_identity(settings_files(s)), IOSettings()) != before
