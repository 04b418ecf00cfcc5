"""partitions.py: a dump is a folder named `CC-MAIN-YYYY-WW` in ASCII, matched whole. A folder named
otherwise (a trailing newline, other digits) is skipped with a warning naming it, and the dumps
beside it are still partitions: one odd folder never takes the code location down."""

import logging
import os
import subprocess
import sys

from fw_assets.partitions import build_dump_partitions, dump_folders, known_dumps
from fw_assets.paths import source_dump_dir
from fw_assets.settings import SOURCE_DIR_ENV

GOOD = "CC-MAIN-2013-20"
ODD = ["CC-MAIN-2013-48\n", "CC-MAIN-٢٠١٣-٢٠", "CC-MAIN-２０１３-２０", "CC-MAIN-2013-2"]


def source_with_odd_folders(root):
    for name in [GOOD, *ODD]:
        source_dump_dir(root, name).mkdir(parents=True)
    return root


def test_folders_not_named_like_a_dump_are_skipped_with_a_warning_naming_them(tmp_path, caplog):
    root = source_with_odd_folders(tmp_path)
    with caplog.at_level(logging.WARNING):
        found = dump_folders(root)
    assert list(found) == [GOOD]
    for name in ODD:
        assert repr(name) in caplog.text, name
    keys = build_dump_partitions(root).get_partition_keys()
    assert GOOD in keys and not set(ODD) & set(keys)
    assert all(key.isascii() and "\n" not in key for key in keys)


def test_the_code_location_loads_beside_odd_folders(tmp_path):
    root = source_with_odd_folders(tmp_path)
    source_dump_dir(root, "CC-MAIN-2099-01").mkdir()  # a dump only on disk: a partition of its own
    script = ("from fw_assets.definitions import defs\n"
              "from fw_assets.partitions import dump_partitions\n"
              "print(sorted(dump_partitions.get_partition_keys())[-1])\n")
    env = {**os.environ, SOURCE_DIR_ENV: str(root)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "CC-MAIN-2099-01"
    assert repr("CC-MAIN-2013-48\n") in done.stderr


def test_the_shipped_dump_list_is_read_whole():
    dumps = known_dumps()
    assert len(dumps) == 110 and dumps == sorted(dumps)
