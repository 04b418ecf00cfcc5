"""The generator's probe plants: only when asked, only the planted rows change, all in the top
bucket, the same bytes every time."""

import hashlib

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from fw_assets.paths import planted_probe_truth_path
from fw_assets.synthetic import write_sample_dump

DUMP = "CC-MAIN-2013-20"


def read(paths) -> pa.Table:
    return pa.concat_tables(pq.read_table(p) for p in paths)


def test_plants_replace_only_their_rows_and_land_in_the_top_bucket(tmp_path):
    plain = write_sample_dump(tmp_path / "plain", DUMP, rows=3_000, files=2, seed=7)
    planted = write_sample_dump(tmp_path / "planted", DUMP, rows=3_000, files=2, seed=7, probe_plant_share=0.02)
    assert not planted_probe_truth_path(tmp_path / "plain", DUMP).exists()
    truth = pq.read_table(planted_probe_truth_path(tmp_path / "planted", DUMP))
    assert set(truth.column("kind").to_pylist()) == {"gibberish", "contract"}
    assert 60 <= truth.num_rows <= 180

    before, after = read(plain), read(planted)
    is_plant = pc.is_in(after.column("id"), truth.column("id"))
    assert after.column("id").equals(before.column("id"))
    assert after.filter(pc.invert(is_plant)).equals(before.filter(pc.invert(is_plant)))
    plants = after.filter(is_plant)
    assert pc.min(plants.column("score")).as_py() >= 4.0
    assert plants.column("text") != before.filter(is_plant).column("text")


def test_planting_is_deterministic(tmp_path):
    digests = []
    for name in ("one", "two"):
        paths = write_sample_dump(tmp_path / name, DUMP, rows=1_500, seed=3, probe_plant_share=0.05)
        files = [*paths, planted_probe_truth_path(tmp_path / name, DUMP)]
        digests.append([hashlib.sha256(p.read_bytes()).hexdigest() for p in files])
    assert digests[0] == digests[1]
