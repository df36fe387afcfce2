"""The parsed-template cache (localrun/template.py): a template is read from
its entry only when its bytes are the ones parsed, reads back exactly what
SAM CLI's parser gives, and a value JSON cannot give back is never cached."""

from __future__ import annotations

import pytest
from samcli.yamlhelper import yaml_parse

import localrun.template as template_module
from localrun.template import parsed_template

TEMPLATE_TEXT = """\
AWSTemplateFormatVersion: "2010-09-09"
Parameters:
  Size:
    Type: Number
    Default: 3
Resources:
  Bucket:
    Type: AWS::S3::Bucket
    Properties:
      BucketName: !Sub "${AWS::StackName}-ids"
      Tags:
        - {Key: made, Value: 2024-01-02}
        - {Key: ratio, Value: 0.5}
        - {Key: on, Value: yes}
"""


@pytest.fixture
def cache(tmp_path, monkeypatch):
    entries = tmp_path / "cache"
    monkeypatch.setattr(template_module, "PARSED_CACHE", entries)
    template_module._parsed.cache_clear()
    yield entries
    template_module._parsed.cache_clear()


def new_process():
    """What a process that has read no template yet knows: the entries only."""
    template_module._parsed.cache_clear()


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def parse_refused(_text):
    raise AssertionError("parsed again: the cache entry was not read")


def test_a_template_parsed_once_is_read_back_from_its_entry_as_parsed(tmp_path, cache, monkeypatch):
    # Given a template parsed once
    first = parsed_template(write(tmp_path / "one.yaml", TEMPLATE_TEXT))
    # When the same bytes are read again in a process that has not read them
    new_process()
    monkeypatch.setattr(template_module, "yaml_parse", parse_refused)
    again = parsed_template(write(tmp_path / "two.yaml", TEMPLATE_TEXT))
    # Then they come from the one entry, exactly as SAM CLI parses them
    assert [entry.suffix for entry in cache.iterdir()] == [".json"]
    assert again == first == dict(yaml_parse(TEMPLATE_TEXT))
    assert again["Resources"]["Bucket"]["Properties"]["BucketName"] == {"Fn::Sub": "${AWS::StackName}-ids"}
    assert [tag["Value"] for tag in again["Resources"]["Bucket"]["Properties"]["Tags"]] == [
        "2024-01-02",
        0.5,
        True,
    ]


def test_a_changed_template_is_parsed_anew(tmp_path, cache):
    # Given a template parsed and cached
    path = write(tmp_path / "template.yaml", TEMPLATE_TEXT)
    assert parsed_template(path)["Parameters"]["Size"]["Default"] == 3
    # When its text changes
    write(path, TEMPLATE_TEXT.replace("Default: 3", "Default: 4"))
    # Then it is read as it is now, and each text has an entry of its own
    assert parsed_template(path)["Parameters"]["Size"]["Default"] == 4
    assert len(list(cache.iterdir())) == 2


def test_a_reader_changing_its_copy_changes_no_other_reading(tmp_path, cache):
    path = write(tmp_path / "template.yaml", TEMPLATE_TEXT)
    parsed_template(path)["Resources"].clear()
    assert "Bucket" in parsed_template(path)["Resources"]


def test_a_value_json_cannot_give_back_is_parsed_each_time_never_cached(tmp_path, cache):
    # Given a template with a key that is not a string (JSON would make it "1")
    path = write(tmp_path / "template.yaml", "Mappings:\n  Sizes:\n    1: small\n")
    # When it is read, Then it is read as YAML says, and nothing is kept
    assert parsed_template(path) == {"Mappings": {"Sizes": {1: "small"}}}
    new_process()
    assert parsed_template(path) == {"Mappings": {"Sizes": {1: "small"}}}
    assert not cache.exists() or not list(cache.iterdir())


def test_an_entry_no_reader_can_use_is_replaced_by_a_parse(tmp_path, cache):
    # Given the entry of a template's bytes cut short (a disk that filled up)
    parsed_template(write(tmp_path / "one.yaml", TEMPLATE_TEXT))
    [entry] = cache.iterdir()
    entry.write_text(entry.read_text()[:20])
    # When another process reads those bytes, Then it parses them and mends the entry
    new_process()
    again = parsed_template(write(tmp_path / "two.yaml", TEMPLATE_TEXT))
    assert again == dict(yaml_parse(TEMPLATE_TEXT))
    assert [path.name for path in cache.iterdir()] == [entry.name]  # no partial file left
    assert template_module.json.loads(entry.read_text()) == again
