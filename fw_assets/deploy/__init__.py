"""Running fw_assets on more than one host: the Celery run launcher, its workers and their heartbeats."""
