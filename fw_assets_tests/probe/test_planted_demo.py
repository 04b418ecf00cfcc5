"""The probe demo's planted documents: the built-in probe gives the gibberish pages the highest
losses, and the contract pages (well-formed, another register) higher losses than typical pages
but lower than gibberish."""

import numpy as np
import pyarrow.parquet as pq

from fw_assets.paths import planted_probe_truth_path
from fw_assets.formats.probe_losses import published_losses
from fw_assets.probe.probe_loss import probe_loss
from fw_assets.probe.resources import ProbeResource
from fw_assets.synthetic import write_sample_dump
from fw_assets.tokenizing.resources import TokenizerResource
from fw_assets.tokenizing.tokenized import tokenized
from fw_assets_tests.helpers import CHAIN, materialize_dump

DUMP = "CC-MAIN-2013-20"


def test_the_builtin_probe_ranks_gibberish_highest_and_the_other_register_above_typical(tmp_path):
    source, output = tmp_path / "source", tmp_path / "output"
    write_sample_dump(source, DUMP, rows=4_000, files=1, seed=11, probe_plant_share=0.03)
    resources = {"tokenizer": TokenizerResource(workers=1), "probe": ProbeResource()}
    materialize_dump(source, output, DUMP, [*CHAIN, tokenized, probe_loss], extra_resources=resources)

    plants = pq.read_table(planted_probe_truth_path(source, DUMP))
    with published_losses(output, "builtin", DUMP) as losses:
        kind_of = dict(zip(plants.column("id").to_pylist(), plants.column("kind").to_pylist()))
        kinds = np.array([kind_of.get(i, "typical") for i in losses.column("id").to_pylist()])
        loss = losses.column("loss").to_numpy()
        top_bucket = losses.column("bucket").to_numpy(zero_copy_only=False) == "4.0"
    assert set(kinds[~top_bucket]) == {"typical"}, "every plant lies in the top bucket"
    gibberish, contract, typical = (loss[kinds == k] for k in ("gibberish", "contract", "typical"))
    assert len(gibberish) > 50 and len(contract) > 50
    assert (np.sort(loss)[::-1][: len(gibberish)] == np.sort(gibberish)[::-1]).all(), "the gibberish holds the top losses"
    assert np.median(typical) < np.median(contract) < gibberish.min()
    assert np.quantile(contract, 0.1) > np.median(typical)
