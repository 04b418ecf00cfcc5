"""How Megatron-Core 0.16's `MegatronDataset` (`megatron_dataset.py`) names a dataset's cache files:
its `unique_identifiers` dumped as JSON (`unique_description`, also the `description.txt` body),
their md5 (`unique_description_hash`), and `<md5>-<class>-<split>-<kind>`, as `GPTDataset` and
`BlendedDataset` join them in their `_build_*` methods.

Ours takes the identifiers as a plain dict built by `gpt_dataset.gpt_description` and
`blended_dataset.blend_description` (Megatron reads them off the dataset object); same text, same
hash.
"""

import hashlib
import json


def description_text(description: dict) -> str:
    """The `description.txt` body (no trailing newline), also the md5 input."""
    # indent 4 and json's other defaults, as Megatron dumps it: other spacing or escaping is
    # another md5, and Megatron would not find the cache
    return json.dumps(description, indent=4)


def cache_file_stem(description: dict) -> str:
    """`<md5>-<class>-<split>`: every cache file of one dataset is named `<stem>-<kind>`."""
    digest = hashlib.md5(description_text(description).encode("utf-8")).hexdigest()
    # a GPTDataset names its split `index_split` (its `split` is the `--split` string); a blend `split`
    split = description["index_split"] if "index_split" in description else description["split"]
    return f"{digest}-{description['class']}-{split}"
