"""`python -m fw_assets.backfill`: one backfill of dumps from the command line, the one the UI
launches from *Materialize all…* on group `fineweb_edu` with the dumps picked.

    python -m fw_assets.backfill --all                        # every completely downloaded dump
    python -m fw_assets.backfill CC-MAIN-2013-20 CC-MAIN-2013-48
    python -m fw_assets.backfill --all --url http://127.0.0.1:3000

It asks the running webserver (`--url`, default http://127.0.0.1:$FW_WEBSERVER_PORT, else port
3000) through its GraphQL API, as the UI does: the daemon runs the backfill, one run per dump
signing it side by side, and Dagster's declarative automation decides and tokenizes each dump
once it and the earlier dumps of the backfill are signed (fw_assets.crawl_order). Dagster's own
CLI launches runs in its process, not backfills: this is that missing command.
"""

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from fw_assets import settings
from fw_assets.formats.dump_files import readiness, scan_dump_folder
from fw_assets.partitions import SIGNING_GROUP, dump_folders

LAUNCH = """mutation($params: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $params) {
  __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message }
  ... on UnauthorizedError { message } } }"""
GROUP_ASSETS = """query($group: AssetGroupSelector!) { assetNodes(group: $group) { assetKey { path } } }"""
LOCATION = {"groupName": SIGNING_GROUP, "repositoryName": "__repository__", "repositoryLocationName": "fw_assets"}


class BackfillError(RuntimeError):
    """The webserver could not be reached, or refused the backfill; the message says why."""


def complete_dumps(source_root: Path) -> tuple[list[str], dict[str, str]]:
    """(The dumps completely downloaded under `source_root`, the others with why they wait), by
    the rule the `new_dumps` sensor applies."""
    ready, waiting = [], {}
    for dump, folder in dump_folders(source_root).items():
        state = readiness(scan_dump_folder(dump, folder), time.time_ns(), settings.sensor_settle_seconds())
        if state.ready:
            ready.append(dump)
        else:
            waiting[dump] = state.reason
    return ready, waiting


def graphql(url: str, query: str, variables: dict) -> dict:
    request = urllib.request.Request(
        f"{url.rstrip('/')}/graphql", data=json.dumps({"query": query, "variables": variables}).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            body = json.loads(response.read())
    except (urllib.error.URLError, OSError) as error:
        raise BackfillError(f"no Dagster webserver answers at {url} ({error}): start it (dagster dev -w "
                            "workspace.yaml, or deploy/celery/local.sh up) or give its address with --url") from error
    if body.get("errors"):
        raise BackfillError(f"the webserver at {url} refused the request: {body['errors'][0].get('message')}")
    return body["data"]


def launch(url: str, dumps: list[str]) -> str:
    """The backfill of group `fineweb_edu` over `dumps`, launched; its id."""
    nodes = graphql(url, GROUP_ASSETS, {"group": LOCATION})["assetNodes"]
    if not nodes:
        raise BackfillError(f"the webserver at {url} serves no asset group {SIGNING_GROUP!r} of code location "
                            "fw_assets")
    params = {"assetSelection": [node["assetKey"] for node in nodes], "partitionNames": dumps}
    result = graphql(url, LAUNCH, {"params": params})["launchPartitionBackfill"]
    if result["__typename"] != "LaunchBackfillSuccess":
        raise BackfillError(f"the backfill was refused: {result.get('message', result['__typename'])}")
    return result["backfillId"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fw_assets.backfill", description=__doc__.split("\n\n")[0])
    parser.add_argument("dumps", nargs="*", help="the dumps to backfill (CC-MAIN-YYYY-WW)")
    parser.add_argument("--all", action="store_true",
                        help="every dump completely downloaded under $FW_SOURCE_DIR/data")
    parser.add_argument("--url", default=f"http://127.0.0.1:{os.environ.get('FW_WEBSERVER_PORT', '3000')}",
                        help="the Dagster webserver (default: %(default)s)")
    args = parser.parse_args(argv)
    if bool(args.dumps) == args.all:
        parser.error("name the dumps, or give --all (not both)")
    dumps = args.dumps
    if args.all:
        dumps, waiting = complete_dumps(settings.source_dir())
        for dump, reason in waiting.items():
            print(f"{dump}: left out, {reason}")
        if not dumps:
            print(f"No completely downloaded dump under {settings.source_dir().resolve()}/data: nothing launched.")
            return 1
    try:
        backfill_id = launch(args.url, dumps)
    except BackfillError as error:
        print(f"python -m fw_assets.backfill: {error}", file=sys.stderr)
        return 2
    print(f"Backfill {backfill_id}: {len(dumps)} dump(s) ({', '.join(dumps)}) to sign side by side; each is "
          f"decided and tokenized once it and the earlier dumps are signed.")
    print(f"Follow it at {args.url.rstrip('/')}/runs/b/{backfill_id}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
