"""What runs without anyone asking: the `new_dumps` sensor that processes each dump once it is
downloaded, `stale_dedup`, which re-decides a later dump when an earlier dump's band keys change,
and `stale_losses`, which scores the probe losses a recipe reweights by once a dump is tokenized
(again); none requests a dump beside its own run (dump_runs.py), nor twice for the same inputs, nor
on an instance that holds another output folder's history (output_folder.py)."""
