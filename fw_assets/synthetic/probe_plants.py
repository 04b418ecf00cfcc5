"""Documents planted for the probe demo: near-gibberish, and well-formed text of another register.

Asked for with `probe_plant_share` (0 by default, so every other output stays byte-identical):
a row that is not a near-duplicate copy becomes, with probability `share` each, a gibberish page
(random letters, digits and symbols in word-like runs) or a clause of a contract (legal register:
defined terms, section numbers, amounts, dates), scored in the top bucket ([4.0, 5.2]). The built-in
probe should give gibberish the highest losses, the contracts higher-than-typical ones. Which id is
which is written to `ROOT/planted/<dump>.probe.parquet` (`id`, `kind`).
"""

import numpy as np
import pyarrow as pa

GIBBERISH, CONTRACT = "gibberish", "contract"
KINDS = (GIBBERISH, CONTRACT)
PLANT_SCHEMA = pa.schema([("id", pa.string()), ("kind", pa.string())])
TOP_SCORES = (4.0, 5.2)

_CHARACTERS = np.frombuffer(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789#%&*+=@~^", np.uint8)
_LEGAL = """
agreement licensor licensee contractor purchaser vendor lessee lessor party parties hereto hereof herein
hereunder thereof therein whereas notwithstanding indemnify indemnification hold harmless warrant warranty
represent representation covenant covenants obligation obligations liability liabilities damages
consequential incidental punitive exemplary breach default cure remedy remedies terminate termination
expiration renewal assignment assign assigns successors permitted consent unreasonably withheld delayed
conditioned confidential information disclosure disclosing receiving proprietary trade secrets governing law
jurisdiction venue arbitration arbitrator tribunal injunctive relief equitable severability waiver amendment
counterparts entire supersedes prior negotiations understandings force majeure act god strike embargo
insolvency bankruptcy receiver trustee lien encumbrance title possession premises lease rent deposit escrow
invoice payment payable due net interest late fee taxes withholding audit records inspection compliance
statute regulation ordinance subcontractor agent employee officer director affiliate subsidiary parent
successor schedule exhibit annex appendix clause section subsection paragraph provision provisions shall
may must not any all each such said foregoing applicable reasonable material adverse effect effective date
commencement term period notice written certified mail receipt acknowledged deemed delivered business day
""".split()


def gibberish(rng: np.random.Generator) -> str:
    """Word-like runs of random characters, a few hundred of them."""
    lengths = rng.integers(2, 11, int(rng.integers(150, 400)))
    characters = _CHARACTERS[rng.integers(0, len(_CHARACTERS), int(lengths.sum()))].tobytes().decode()
    ends = np.cumsum(lengths)
    return " ".join(characters[e - n : e] for e, n in zip(ends.tolist(), lengths.tolist()))


def contract(rng: np.random.Generator) -> str:
    """Numbered sentences of legal vocabulary (none of the sample prose's words), capitalised and
    punctuated like the prose: well-formed text of another register."""
    sentences = []
    for _ in range(int(rng.integers(10, 40))):
        words = [_LEGAL[i] for i in rng.integers(0, len(_LEGAL), int(rng.integers(8, 24)))]
        sentences.append(f"{rng.integers(1, 30)}.{rng.integers(1, 12)} {_sentence_start(' '.join(words))}.")
    return " ".join(sentences)


def _sentence_start(words: str) -> str:
    return words[0].upper() + words[1:]


def plant_text(kind: str, rng: np.random.Generator) -> str:
    return gibberish(rng) if kind == GIBBERISH else contract(rng)


def top_score(rng: np.random.Generator) -> float:
    """A score in the top bucket, on the classifier's 1/32 grid there."""
    return float(np.round(rng.uniform(*TOP_SCORES) * 32) / 32)
