"""Text to shingles: `shingles(texts, n)`, the word n-gram hashes of each document, and
`Shingles`, what it returns; `fmix64` is the hash mixer the band keys reuse, `hash_strings` the
string hash the content versions reuse.

- definition.py: the definition (normalisation, words, n-gram hashes), vectorised with Arrow
  kernels and numpy: "the Arrow path".
- code_points.py: what the definition's normalisation does to each code point, as lookup tables,
  derived by running the definition's own kernels on every code point.
- kernel.py: the compiled single pass over a document's UTF-8 bytes, using those tables.
- fused.py: its driver, `shingles`: the compiled pass, with the Arrow path for the documents it
  leaves (a code point whose effect depends on its neighbours), equal bit for bit to the Arrow path.

Other modules import this package only; tests of a submodule may import it.
"""

from fw_assets.dedup.shingling.definition import Shingles, fmix64, hash_strings
from fw_assets.dedup.shingling.fused import shingles

__all__ = ["Shingles", "fmix64", "hash_strings", "shingles"]
