"""paths.py's name rules: a name that becomes a path, and a dump name, are matched whole and in
ASCII: no trailing newline, no digits or letters of other scripts."""

import pytest

from fw_assets.paths import is_dump_name, is_safe_name


@pytest.mark.parametrize("name", ["CC-MAIN-2013-20", "CC-MAIN-2024-51"])
def test_dump_names(name):
    assert is_dump_name(name)


@pytest.mark.parametrize("name", [
    "CC-MAIN-2013-20\n", "CC-MAIN-2013-20\r\n", " CC-MAIN-2013-20", "CC-MAIN-٢٠١٣-٢٠", "CC-MAIN-２０１３-２０",
    "CC-MAIN-2013-2", "CC-MAIN-2013-200", "cc-main-2013-20", "CC-MAIN-2013-20/..", "",
])
def test_names_that_are_not_dump_names(name):
    assert not is_dump_name(name)


@pytest.mark.parametrize("name", ["demo", "cl100k_base", "tiny-probe.v2", "a" * 100])
def test_safe_names(name):
    assert is_safe_name(name)


@pytest.mark.parametrize("name", [
    "demo\n", "demo\r", "de\nmo", "démo", "ｄｅｍｏ", "٢٠", "..", "a..b", ".hidden", "-x", "a/b", "a" * 101, "",
])
def test_names_that_may_not_become_paths(name):
    assert not is_safe_name(name)
