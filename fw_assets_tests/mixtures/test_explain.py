"""explain.py: the documents `explain_sample` names hold exactly the tokens of Megatron-Core's own
`BlendedDataset[N]`, and their ids are the original documents' (through a curriculum's views, and
a reweighted source's)."""

import json
from pathlib import Path

import numpy as np
import pytest

from fw_assets.formats.indexed_dataset import IndexedDatasetReader
from fw_assets.mixtures.explain import explain_sample
from fw_assets.mixtures.megatron.blended_megatron_dataset_builder import stage_caches
from fw_assets.mixtures.published import stage_from_plan_json
from fw_assets.paths import token_prefix
from fw_assets_tests.support.megatron_oracle import TOKENIZER, megatron_build

pytestmark = pytest.mark.needs_extra("megatron")


def test_explain_names_the_tokens_of_megatrons_sample(case, process_group):
    datasets = megatron_build(case.stage, case.ours)
    rng = np.random.default_rng(0)
    for cache, blended in zip(stage_caches(case.stage), [d for d in datasets if d is not None]):
        for n in [0, 1, len(blended) - 1, *rng.integers(0, len(blended), 5)]:
            item = blended[int(n)]
            expected = np.concatenate([item["tokens"].numpy(), item["labels"].numpy()[-1:]])
            explained = explain_sample(case.stage, case.ours, cache.split, int(n))
            member = case.stage.members[int(item["dataset_id"])].file
            assert explained["dataset"] == member.prefix
            reader = IndexedDatasetReader(Path(member.path))
            tokens = [reader[d["document_index"]][d["offset"]: d["offset"] + d["length"]]
                      for d in explained["documents"]]
            assert np.array_equal(np.concatenate(tokens), expected)
            original = IndexedDatasetReader(token_prefix(case.root / "out", TOKENIZER, member.bucket, member.dump))
            for d in explained["documents"]:
                # the id names the original document (a reweighted case reads a view of it)
                number = int(d["id"].rsplit("-", 1)[1].rstrip(">"))
                assert d["id"] == f"<urn:uuid:{member.bucket}-{member.dump}-{number:06d}>"
                assert np.array_equal(original[number], reader[d["document_index"]])
                if "/views/" not in member.path:
                    assert number == d["document_index"]


def test_explain_names_source_ids_through_the_views(curriculum_cache, process_group):
    mixture, ours, _ = curriculum_cache
    written = json.loads(json.dumps(mixture.to_json()))
    for name in ("explore-2", "long"):
        stage = stage_from_plan_json(written, name)
        assert stage == mixture.stage(name)
        blended = megatron_build(stage, ours)[0]
        for n in (0, 7, len(blended) - 1):
            explained = explain_sample(stage, ours, "train", n)
            member = stage.members[int(blended[n]["dataset_id"])].file
            assert explained["dataset"] == member.prefix and f"/views/{name}/" in member.prefix
            original = IndexedDatasetReader(
                Path(member.path.replace(f"mixtures/curriculum/views/{name}", "tokenized/synthetic"))
            )
            pieces = []
            for d in explained["documents"]:
                # the id names the original document; its tokens are the view's document's
                number = int(d["id"].rsplit("-", 1)[1].rstrip(">"))
                assert d["id"].startswith(f"<urn:uuid:{member.bucket}-{member.dump}-")
                pieces.append(original[number][d["offset"]: d["offset"] + d["length"]])
            item = blended[n]
            sample = np.concatenate([item["tokens"].numpy(), item["labels"].numpy()[-1:]])
            assert np.array_equal(np.concatenate(pieces), sample)
