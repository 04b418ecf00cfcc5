"""The model probe's memory does not grow with a document's length: a document of tens of
megabytes is cut before it is encoded, so scoring it takes about what scoring a short one takes;
nor with a batch's: the loss holds the float32 logits of a slice of positions, never of the batch.
Each measured in a process of its own (peak RSS)."""

import json
import subprocess
import sys

import pytest

from bench.tiny_model import WORDS, save_tiny_model

pytestmark = pytest.mark.needs_extra("probe")

SCORE_ONE = """
import json, resource, sys
from pathlib import Path
from fw_assets.probe.causal_lm import CausalLM
from fw_assets.probe.probes import ProbeSpec
model = CausalLM(ProbeSpec("tiny", Path(sys.argv[1]), max_tokens=64, batch_tokens=4096))
text = " ".join(%r[i %% %d] for i in range(int(sys.argv[2])))
tokens, nll, nbytes, truncated = model.score([text])
print(json.dumps({"tokens": int(tokens[0]), "truncated": bool(truncated[0]),
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
""" % (WORDS, len(WORDS))


def score_in_a_process(model, words: int) -> dict:
    finished = subprocess.run([sys.executable, "-c", SCORE_ONE, str(model), str(words)],
                              capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0, finished.stderr[-3000:]
    return json.loads(finished.stdout.splitlines()[-1])


@pytest.mark.e2e
def test_a_50_mb_document_is_scored_in_the_memory_of_a_short_one(tmp_path):
    model = save_tiny_model(tmp_path / "tiny")
    short = score_in_a_process(model, 1_000)
    huge = score_in_a_process(model, 8_000_000)  # ~50 MB of text, ~8 million tokens
    assert short["truncated"] and huge["truncated"] and huge["tokens"] == short["tokens"] == 64
    assert huge["peak_rss_mib"] < short["peak_rss_mib"] + 200, (short, huge)


SCORE_A_BATCH = """
import json, resource, sys
from pathlib import Path
from fw_assets.probe.causal_lm import CausalLM
from fw_assets.probe.probes import ProbeSpec
model = CausalLM(ProbeSpec("wide", Path(sys.argv[1]), max_tokens=1000, batch_tokens=16384))
loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
texts = [" ".join(%r[(i + j) %% %d] for j in range(1200)) for i in range(16)]
tokens, nll, nbytes, truncated = model.score(texts)
print(json.dumps({"tokens": int(tokens.sum()), "loaded_mib": loaded,
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
""" % (WORDS, len(WORDS))


@pytest.mark.e2e
def test_a_batch_of_long_documents_with_a_32k_vocabulary_never_holds_its_float32_logits_whole(tmp_path):
    """16 documents of 1,000 tokens in one batch: their float32 logits are 16 x 1,001 x 32,000 x 4
    bytes = 1.9 GiB (and as much again for their log-softmax); scoring them takes less than half
    of that."""
    model = save_tiny_model(tmp_path / "wide", vocabulary=32_000, positions=1088)
    finished = subprocess.run([sys.executable, "-c", SCORE_A_BATCH, str(model)], capture_output=True, text=True,
                              timeout=600)
    assert finished.returncode == 0, finished.stderr[-3000:]
    measured = json.loads(finished.stdout.splitlines()[-1])
    whole_logits_mib = 16 * 1001 * 32_000 * 4 / 2**20
    assert measured["tokens"] == 16_000
    assert measured["peak_rss_mib"] - measured["loaded_mib"] < whole_logits_mib / 2, measured
