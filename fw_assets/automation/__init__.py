"""What runs without anyone asking: the `new_dumps` sensor that processes each dump once it is
downloaded, and `stale_dedup`, which re-decides a later dump when an earlier dump's band keys
change; neither requests a dump beside its own run (dump_runs.py)."""
