"""Tools with no domain and no Dagster: publishing by rename, per-machine slots, disk space, SQL
loading, code versions, progress, write-behind files, compiled loops. What one step writes and
another reads is in fw_assets.formats."""
