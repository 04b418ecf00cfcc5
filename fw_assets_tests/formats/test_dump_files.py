"""dump_files.py: a Hugging Face shard is named `train-NNNNN-of-NNNNN.parquet` in ASCII digits, matched
whole: a file named with other digits is not a shard, so it never stands in for a missing one."""

from fw_assets.formats.dump_files import readiness, scan_dump_folder, shard_set_gaps

ARABIC_SHARD_0 = "train-٠٠٠٠٠-of-٠٠٠٠٢.parquet"  # int() reads these digits as 0 and 2


def test_a_shard_named_with_other_digits_does_not_fill_the_set():
    gaps = shard_set_gaps([ARABIC_SHARD_0, "train-00001-of-00002.parquet"])
    assert gaps == "1 of 2 shards missing (train-00000-of-00002.parquet)"


def test_a_folder_missing_shard_0_is_not_ready_beside_a_file_named_with_other_digits(tmp_path):
    for name in (ARABIC_SHARD_0, "train-00001-of-00002.parquet"):
        (tmp_path / name).write_bytes(b"PAR1" + b"\0" * 8 + b"PAR1")
    state = scan_dump_folder("CC-MAIN-2013-20", tmp_path)
    verdict = readiness(state, state.newest_change_ns, settle_seconds=60)
    assert not verdict.ready, verdict.reason
