"""A tiny GPT-2-style causal LM and word-level tokenizer, built and saved locally (no hub): the probe
benchmark's model and the probe tests'."""

from pathlib import Path

WORDS = "the cell energy plants animals water light reading writing lesson class students learn".split()


def save_tiny_model(
    folder: Path, seed: int = 0, missing_ids: int = 0, vocabulary: int | None = None, positions: int = 128
) -> Path:
    """`folder` with a 1-layer GPT-2 (32-wide, weights drawn with `seed`, `missing_ids` fewer
    embeddings than its tokenizer has ids, or `vocabulary` embeddings, `positions` positions) and
    its tokenizer, as save_pretrained writes them."""
    from transformers import GPT2Config

    tokenizer = tiny_tokenizer()
    config = GPT2Config(vocab_size=vocabulary or len(tokenizer) - missing_ids, n_positions=positions, n_embd=32,
                        n_layer=1, n_head=2, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    return save_tiny_architecture(folder, config, seed)


def save_tiny_architecture(folder: Path, config, seed: int = 0) -> Path:
    """`folder` with a causal LM of `config` (a transformers config; weights drawn with `seed`)
    and the word-level tokenizer, as save_pretrained writes them."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    tiny_tokenizer().save_pretrained(folder)
    return folder


def tiny_tokenizer():
    """A word-level tokenizer of WORDS and three special tokens (BOS = EOS `<|endoftext|>`)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordLevelTrainer(special_tokens=["[UNK]", "<|endoftext|>", "[PAD]"])
    core.train_from_iterator([" ".join(WORDS)] * 3, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        unk_token="[UNK]",
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        pad_token="[PAD]",
    )
