"""A tiny GPT-2-style causal LM and word-level tokenizer, built and saved locally (no hub): the probe
benchmark's model and the probe tests'."""

from pathlib import Path

WORDS = "the cell energy plants animals water light reading writing lesson class students learn".split()


def save_tiny_model(folder: Path, seed: int = 0, missing_ids: int = 0) -> Path:
    """`folder` with a 1-layer GPT-2 (32-wide, weights drawn with `seed`, `missing_ids` fewer
    embeddings than its tokenizer has ids) and its tokenizer, as save_pretrained writes them."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    core = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordLevelTrainer(special_tokens=["[UNK]", "<|endoftext|>", "[PAD]"])
    core.train_from_iterator([" ".join(WORDS)] * 3, trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        unk_token="[UNK]",
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        pad_token="[PAD]",
    )
    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=core.get_vocab_size() - missing_ids, n_positions=128, n_embd=32, n_layer=1, n_head=2,
                        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    GPT2LMHeadModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
