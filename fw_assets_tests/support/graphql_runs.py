"""Runs as the webserver's GraphQL gives them, for the tests of the benches that read them."""

BOOT = 1_000.0


def graphql_run(run_id: str, dump: str, host: str, created: float, steps: dict[str, tuple[float, float]],
                starting: float, process: float, started: float, ended: float, status: str = "SUCCESS") -> dict:
    """A run as the webserver's GraphQL gives it; its process started `process` (Unix seconds)."""
    events = [("AssetMaterializationPlannedEvent", created), ("RunEnqueuedEvent", created),
              ("RunStartingEvent", starting), ("EngineEvent", process), ("RunStartEvent", started)]
    return {
        "runId": run_id, "jobName": "__ASSET_JOB", "status": status, "creationTime": created,
        "startTime": started, "endTime": ended,
        "tags": [{"key": "dagster/partition", "value": dump}, {"key": "fw_assets/host", "value": host},
                 {"key": "fw_assets/process_start", "value": str(round((process - BOOT) * 100))}],
        "stepStats": [{"stepKey": key, "status": "SUCCESS", "startTime": start, "endTime": end}
                      for key, (start, end) in steps.items()],
        "eventConnection": {"events": [{"__typename": kind, "timestamp": str(round(at * 1000))}
                                       for kind, at in events]},
    }
