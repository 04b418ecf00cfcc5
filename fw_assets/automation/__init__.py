"""What runs without anyone asking: the `new_dumps` sensor that signs each dump once it is
downloaded, `decide_in_crawl_order`, Dagster's declarative automation that decides and tokenizes
each dump once the dumps it reads are signed (fw_assets.crawl_order), `stale_losses`, which scores
the probe losses a recipe reweights by once a dump is tokenized (again), and `recipe_inputs`; none
requests a dump beside its own run or an open backfill's (dump_runs.py), nor twice for the same
inputs, nor on an instance that holds another output folder's history (output_folder.py)."""
