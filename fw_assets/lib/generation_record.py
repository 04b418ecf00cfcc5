"""The one schema of a generation record, `published/<name>.json` (fw_assets.lib.publish), checked
wherever a record is read: every field required, with its type, and nothing else.

    format           2: this layout (a record without it or of another format is refused)
    name             the publication, e.g. `tokenized-cl100k_base_offline-CC-MAIN-2013-20`: the
                     record's own file name
    dump             its partition (a dump, or a recipe): its name's (fw_assets.paths.publication_partition)
    generation       12 hex digits, new for each publication
    published_at     when, in UTC: `YYYY-MM-DDTHH:MM:SSZ`
    code_version     the code version of the asset that published it
    files            each published file, by its path under the output folder (relative, never
                     leaving it): {"size": bytes, "xxh3_128": its checksum, 32 hex digits}, and for
                     a hard link to another publication's file, "link_of": that file's path (its
                     bytes are verified under that file's record while both are one file)
    contents         what the writer says of its content (an object; its keys are the step's)
    inputs           what it was made from, by name, possibly none: each an object; a publication's
                     with `generation` (12 hex digits, or null: not published then) and, where the
                     reader compares content, `content_version` (a string)
    record_checksum  xxh3-128 of the other fields as canonical JSON: any edit or damaged byte shows

A record that fails any of these is refused (`RecordRefused`) naming its file and what is wrong;
what to run to make it again is the reader's to say (fw_assets.formats.lineage).
"""

import json
import re
from pathlib import Path, PurePosixPath
from typing import Any

import xxhash

from fw_assets.lib.checksums import ALGORITHM, DIGEST_LENGTH
from fw_assets.paths import publication_partition

RECORD_FORMAT = 2
FIELDS: dict[str, type] = {
    "format": int,
    "name": str,
    "dump": str,
    "generation": str,
    "published_at": str,
    "code_version": str,
    "files": dict,
    "contents": dict,
    "inputs": dict,
    "record_checksum": str,
}
FILE_FIELDS: dict[str, type] = {"size": int, ALGORITHM: str}
LINK_OF = "link_of"  # the one optional field of a file's entry
GENERATION = re.compile(r"[0-9a-f]{12}")
DIGEST = re.compile(rf"[0-9a-f]{{{DIGEST_LENGTH}}}")
PUBLISHED_AT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")
# Folders of the output root that hold no published file of a record.
NOT_PUBLISHED = ("published", ".staging")


class RecordRefused(ValueError):
    """A generation record that cannot be trusted: missing fields, damaged, of another publication
    or of a format this code does not read."""

    def __init__(self, name: str, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.name, self.path, self.reason = name, path, reason


def file_entry(size: int, checksum: str, link_of: str | None = None) -> dict:
    """What a record says of one published file (a hard link to another publication's file, at
    `link_of`, relative to the output folder)."""
    return {"size": size, ALGORITHM: checksum, **({LINK_OF: link_of} if link_of else {})}


def sealed(record: dict) -> dict:
    """`record` (every field but `record_checksum`) with its checksum."""
    return {**record, "record_checksum": _record_checksum(record)}


def _record_checksum(record: dict) -> str:
    fields = {key: value for key, value in record.items() if key != "record_checksum"}
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return xxhash.xxh3_128_hexdigest(canonical.encode())


def parse_record(path: Path, name: str, text: str | bytes) -> dict:
    """The record of publication `name`, read from `path` as `text`; RecordRefused if it is not
    one (module docstring)."""
    try:
        record = json.loads(text)
    except ValueError as error:  # JSONDecodeError, or bytes that are not UTF-8
        raise RecordRefused(name, path, f"not a generation record: it is not JSON ({error}); truncated or damaged")
    reason = _shape_problem(record) or _identity_problem(record, name) or _values_problem(record)
    if reason:
        raise RecordRefused(name, path, reason)
    return record


def _shape_problem(record: Any) -> str | None:
    if not isinstance(record, dict):
        return f"not a generation record: a JSON {type(record).__name__}, not an object"
    if "format" not in record:
        return f"a record of an unknown shape (no `format`; this fw_assets reads format {RECORD_FORMAT})"
    if record["format"] != RECORD_FORMAT:
        return f"a record of format {record['format']!r}; this fw_assets reads format {RECORD_FORMAT}"
    missing = [field for field in FIELDS if field not in record]
    unknown = sorted(set(record) - set(FIELDS))
    wrong = [f"`{f}` is a {_kind(record[f])}, not a {FIELDS[f].__name__}" for f in FIELDS
             if f in record and not _is(record[f], FIELDS[f])]
    if missing or unknown or wrong:
        problems = ([f"`{f}` is missing" for f in missing] + [f"`{f}` is not a field of a record" for f in unknown]
                    + wrong)
        return f"a record of an unknown shape: {'; '.join(problems)}"
    if record["record_checksum"] != _record_checksum(record):
        return "its content does not match its checksum: edited or damaged since it was published"
    return None


def _identity_problem(record: dict, name: str) -> str | None:
    if record["name"] != name:
        return f"it is the record of {record['name']!r}, not of {name!r} (a copy or a link of another's record)"
    if record["dump"] != publication_partition(name):
        return f"its partition {record['dump']!r} is not its name's, {publication_partition(name)!r}"
    return None


def _values_problem(record: dict) -> str | None:
    if not GENERATION.fullmatch(record["generation"]):
        return f"generation {record['generation']!r} is not 12 hex digits"
    if not PUBLISHED_AT.fullmatch(record["published_at"]):
        return f"published_at {record['published_at']!r} is not YYYY-MM-DDTHH:MM:SSZ"
    if not record["code_version"]:
        return "its code_version is empty"
    for relative, entry in record["files"].items():
        if problem := _file_problem(relative, entry):
            return f"file {relative!r}: {problem}"
    for input_name, entry in record["inputs"].items():
        if problem := _input_problem(entry):
            return f"input {input_name!r}: {problem}"
    return None


def _file_problem(relative: str, entry: Any) -> str | None:
    if not _published_path(relative):
        return "not a path inside the output folder's published files"
    if not isinstance(entry, dict) or not set(FILE_FIELDS) <= set(entry) <= {*FILE_FIELDS, LINK_OF}:
        return f"is {json.dumps(entry)[:80]}, not {{\"size\": …, \"{ALGORITHM}\": …}}"
    if LINK_OF in entry and not (isinstance(entry[LINK_OF], str) and _published_path(entry[LINK_OF])):
        return f"{LINK_OF} {entry[LINK_OF]!r} is not a path inside the output folder's published files"
    if not _is(entry["size"], int) or entry["size"] < 0:
        return f"size {entry['size']!r} is not a number of bytes"
    if not isinstance(entry[ALGORITHM], str) or not DIGEST.fullmatch(entry[ALGORITHM]):
        return f"{ALGORITHM} {entry[ALGORITHM]!r} is not {DIGEST_LENGTH} hex digits"
    return None


def _published_path(relative: str) -> bool:
    """A normalized relative path inside the output folder, outside its records and staging."""
    path = PurePosixPath(relative)
    return not (path.is_absolute() or ".." in path.parts or str(path) != relative or path.parts[0] in NOT_PUBLISHED)


def _input_problem(entry: Any) -> str | None:
    if not isinstance(entry, dict):
        return f"a {_kind(entry)}, not an object"
    generation = entry.get("generation")
    if generation is not None and not (isinstance(generation, str) and GENERATION.fullmatch(generation)):
        return f"generation {generation!r} is neither null nor 12 hex digits"
    if "content_version" in entry and not isinstance(entry["content_version"], str):
        return f"content_version {entry['content_version']!r} is not a string"
    return None


def _is(value: Any, kind: type) -> bool:
    """isinstance, but a JSON `true` is no number."""
    return isinstance(value, kind) and not (kind is int and isinstance(value, bool))


def _kind(value: Any) -> str:
    return {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), type(value).__name__)
