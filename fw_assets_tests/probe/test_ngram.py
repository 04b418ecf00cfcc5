"""The built-in probe's bigram model: a proper distribution, the Kneser-Ney formula, and the
deterministic reference halves."""

import numpy as np
import pyarrow as pa
import xxhash

from fw_assets.probe.ngram import (
    DISCOUNT,
    REFERENCE_GROUPS,
    REFERENCE_SEED,
    BigramModel,
    document_losses,
    reference_halves,
)

VOCAB, EOD = 12, 11


def model() -> BigramModel:
    documents = [np.array([1, 2, 3, 1, 2, EOD]), np.array([4, 2, 3, EOD]), np.array([1, 5, EOD])]
    return BigramModel.fit(iter(documents), VOCAB, EOD)


def probabilities(m: BigramModel, previous: int) -> np.ndarray:
    tokens = np.arange(VOCAB)
    return np.exp(-m.negative_log_likelihoods(tokens, np.full(VOCAB, previous)))


def test_every_context_gives_a_distribution_over_the_vocabulary():
    m = model()
    for previous in range(VOCAB):  # seen contexts and unseen ones (7, 8, ...)
        assert abs(probabilities(m, previous).sum() - 1.0) < 1e-12


def test_a_seen_bigram_follows_the_interpolated_kneser_ney_formula():
    m = model()
    # after 1: (1,2) twice, (1,5) once; c(1) = 3, N1+(1,.) = 2
    continuation_2 = m.continuation[2]
    expected = (2 - DISCOUNT) / 3 + DISCOUNT * 2 / 3 * continuation_2
    assert abs(probabilities(m, 1)[2] - expected) < 1e-15
    assert probabilities(m, 1)[2] > probabilities(m, 1)[5] > probabilities(m, 1)[9]


def test_document_losses_sum_each_documents_tokens_from_the_end_of_the_one_before():
    m = model()
    tokens, lengths = np.array([1, 2, EOD, 4, EOD]), np.array([3, 2])
    expected = [
        m.negative_log_likelihoods(np.array([1, 2, EOD]), np.array([EOD, 1, 2])).sum(),
        m.negative_log_likelihoods(np.array([4, EOD]), np.array([EOD, 4])).sum(),
    ]
    assert np.allclose(document_losses(m, tokens, lengths, EOD), expected)


def test_reference_halves_are_a_fixed_sixteenth_each_keyed_on_the_id():
    ids = [f"<urn:uuid:{i:08d}>" for i in range(32_000)]
    halves = reference_halves(pa.array(ids))
    for half in (0, 1):
        assert abs((halves == half).mean() - 1 / REFERENCE_GROUPS) < 0.005
    assert (reference_halves(pa.array(ids[::-1])) == halves[::-1]).all()
    documented = [xxhash.xxh64_intdigest(i.encode(), seed=REFERENCE_SEED) % REFERENCE_GROUPS for i in ids]
    assert halves.tolist() == [g if g < 2 else -1 for g in documented]
