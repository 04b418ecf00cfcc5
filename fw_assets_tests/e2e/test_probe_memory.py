"""The model probe's memory does not grow with a document's length: a document of tens of
megabytes is cut before it is encoded, so scoring it takes about what scoring a short one takes.
Each measured in a process of its own (peak RSS)."""

import json
import subprocess
import sys

import pytest

pytest.importorskip("transformers", reason="the model probe needs the `probe` extra (pip install -e '.[probe]')")

from bench.tiny_model import WORDS, save_tiny_model  # noqa: E402

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
