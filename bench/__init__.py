"""Benchmarks of fw_assets against the floor, the seed's datatrove pipeline and the tokenizer.

Run `python -m bench.run --help`; results are in docs/benchmarks.md.
"""
