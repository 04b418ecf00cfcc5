"""Tokenizing building blocks: tokenizer configuration, parallel encoding, Megatron token files."""
