"""Real Dagster services for the end-to-end tests and the benchmarks: a webserver and a daemon,
their GraphQL API, and a headless Chromium to look at the UI. Everything started here is stopped by
`stop()`/`close()`. In bench/ because the tests may import bench/, never the other way round."""

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import dagster as dg
import requests
import yaml
from websockets.sync.client import connect

from fw_assets.definitions import defs
from fw_assets.jobs import signing_job
from fw_assets.partitions import KEPT_GROUP, SIGNING_GROUP

REPO_ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
STOP_GRACE_SECONDS = 30
# What the CLI selects to run one dump's whole chain in one process.
DUMP_CLI_SELECTION = f"group:{SIGNING_GROUP},group:{KEPT_GROUP}"
DECISIONS_SENSOR = "decide_in_crawl_order"
PROBE_SCORING_SENSOR = "stale_losses"
RUN_TIMEOUT = 240  # seconds; a run of a small sample dump takes well under a minute here

RUN_FIELDS = """runId jobName status tags { key value } stepStats { stepKey status }
  eventConnection(afterCursor: null) { events { __typename
    ... on ExecutionStepFailureEvent { stepKey error { message } }
    ... on AssetCheckEvaluationEvent { evaluation { assetKey { path } checkName success } }
    ... on RunFailureEvent { message } } }"""
# A sensor of the code location, by its GraphQL variable $sensor.
SENSOR_SELECTOR = (
    '{repositoryName: "__repository__", repositoryLocationName: "fw_assets", sensorName: $sensor}'
)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for(what: str, check: Callable[[], Any], timeout: float, every: float = 1.0, logs=()) -> Any:
    """Poll `check` until it returns something truthy; fail naming `what` (and the logs' tails)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            tails = "\n".join(f"--- {log} ---\n{tail(log)}" for log in logs)
            raise AssertionError(f"gave up after {timeout:.0f}s waiting for {what}\n{tails}")
        time.sleep(every)


def tail(path: Path, chars: int = 4000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else "(no log)"


def dagster_cli(*args: str, env: dict[str, str], cwd: Path, timeout: float = 600) -> str:
    """Run this venv's `dagster` CLI; fail with its output unless it succeeds. Returns its stdout."""
    completed = subprocess.run(
        [str(BIN / "dagster"), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert completed.returncode == 0, (
        f"dagster {' '.join(args)} exited {completed.returncode}:\n"
        f"{completed.stdout[-3000:]}\n{completed.stderr[-3000:]}"
    )
    return completed.stdout


def migrate_instance(env: dict[str, str]) -> str:
    """`dagster instance migrate` on the instance of env's DAGSTER_HOME: creates or upgrades its schemas."""
    return dagster_cli("instance", "migrate", env=env, cwd=Path(env["DAGSTER_HOME"]))


class Service:
    """One command in its own process group, logging to `<home>/<name>.log`."""

    def __init__(self, name: str, command: list[str], home: Path, env: dict[str, str]):
        self.name = name
        self.log = home / f"{name}.log"
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(
                command, cwd=home, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        """SIGTERM the process group, then SIGKILL it and every descendant still alive."""
        group = self.process.pid
        family = descendants(group)
        _signal_group(group, signal.SIGTERM)
        try:
            self.process.wait(STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            pass
        _signal_group(group, signal.SIGKILL)
        for pid in family | descendants(group):
            _signal_pid(pid, signal.SIGKILL)
        self.process.wait()


class DagsterServices:
    """`dagster-webserver` and `dagster-daemon run` over workspace.yaml with a private instance.

    `sensors_off`: sensors switched off in the UI before the daemon starts, so that none of them
    ticks at all (one switched off while the daemon runs may still finish a tick it began)."""

    def __init__(self, home: Path, env: dict[str, str], sensors_off: Sequence[str] = ()):
        self.home = home
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._workspace = str(REPO_ROOT / "workspace.yaml")
        self._env = {**os.environ, **env, "DAGSTER_HOME": str(home)}
        self._sensors_off = tuple(sensors_off)
        # Create the schemas first (as docs/operations.md says): two services creating them at once race.
        migrate_instance(self._env)
        self.services = [
            Service("webserver", [str(BIN / "dagster-webserver"), "-h", "127.0.0.1", "-p", str(self.port),
                                  "-w", self._workspace], home, self._env),
        ]
        if not self._sensors_off:
            self._start_daemon()

    def _daemon_started(self) -> bool:
        return any(service.name == "daemon" for service in self.services)

    def _start_daemon(self) -> None:
        self.services.append(
            Service("daemon", [str(BIN / "dagster-daemon"), "run", "-w", self._workspace], self.home, self._env))

    @property
    def logs(self) -> list[Path]:
        return [service.log for service in self.services]

    def wait_until_ready(self, timeout: float = 120) -> None:
        """The webserver answers and the code location loaded without errors."""
        wait_for("the webserver to answer", self._answers, timeout, logs=self.logs)
        entries = wait_for("the code location to load", self._loaded_locations, timeout, logs=self.logs)
        for entry in entries:
            error = entry.get("locationOrLoadError") or {}
            messages = [error.get("message")] + [cause["message"] for cause in error.get("causes", [])]
            assert not error.get("message"), f"code location {entry['name']} failed to load: {messages}"
        if not self._daemon_started():  # it waits for `sensors_off`
            for sensor in self._sensors_off:
                self.stop_sensor(sensor)
            self._start_daemon()

    def _answers(self) -> bool:
        for service in self.services:
            assert service.running(), f"{service.name} exited early:\n{tail(service.log)}"
        try:
            return requests.get(f"{self.url}/server_info", timeout=5).ok
        except requests.ConnectionError:
            return False

    def _loaded_locations(self) -> list[dict] | None:
        data = self.graphql(
            """{ workspaceOrError { ... on Workspace { locationEntries {
                 name loadStatus locationOrLoadError { ... on PythonError { message causes { message } } }
               } } } }"""
        )
        entries = data["workspaceOrError"]["locationEntries"]
        return entries if entries and all(e["loadStatus"] == "LOADED" for e in entries) else None

    def graphql(self, query: str, variables: dict | None = None) -> dict:
        response = requests.post(
            f"{self.url}/graphql", json={"query": query, "variables": variables or {}}, timeout=60
        )
        response.raise_for_status()
        body = response.json()
        assert not body.get("errors"), json.dumps(body["errors"], indent=1)
        return body["data"]

    def stop(self) -> None:
        for service in reversed(self.services):
            service.stop()

    @classmethod
    @contextmanager
    def running(cls, home: Path, env: dict[str, str], sensors_off: Sequence[str] = ()) -> Iterator["DagsterServices"]:
        """The services started and ready (the code location loaded), stopped on leaving."""
        services = cls(home, env, sensors_off)
        try:
            services.wait_until_ready()
            yield services
        finally:
            services.stop()

    # --- what a user does and sees in the UI, through the same GraphQL API -----------------------

    def runs(self, tags: dict[str, str]) -> list[dict]:
        filter_tags = [{"key": k, "value": v} for k, v in tags.items()]
        query = f"""query($tags: [ExecutionTag!]) {{
            runsOrError(filter: {{tags: $tags}}) {{ ... on Runs {{ results {{ {RUN_FIELDS} }} }} }} }}"""
        return self.graphql(query, {"tags": filter_tags})["runsOrError"]["results"]

    def wait_for_runs(self, what: str, tags: dict[str, str], count: int, timeout: float = RUN_TIMEOUT) -> list[dict]:
        """Wait until `count` runs with `tags` succeeded; fail at once, with the step errors, if one failed."""

        def finished() -> list[dict] | None:
            found = self.runs(tags)
            for run in found:
                assert run["status"] != "FAILURE", f"{what}: run {run['runId']} failed: {failure_messages(run)}"
            done = [run for run in found if run["status"] == "SUCCESS"]
            return done if len(done) >= count else None

        return wait_for(what, finished, timeout, every=2, logs=self.logs)

    def launch_backfill(
        self, asset_keys: list[dg.AssetKey], partitions: list[str], tags: Mapping[str, str] | None = None
    ) -> str:
        """What *Materialize all… → pick dumps → (Add tags) → Launch backfill* sends; returns the
        backfill id."""
        params = {"assetSelection": [{"path": key.path} for key in asset_keys], "partitionNames": partitions,
                  "tags": [{"key": key, "value": value} for key, value in (tags or {}).items()]}
        data = self.graphql(
            """mutation($params: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $params) {
                 __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message } } }""",
            {"params": params},
        )
        result = data["launchPartitionBackfill"]
        assert result["__typename"] == "LaunchBackfillSuccess", result
        return result["backfillId"]

    def partition_statuses(self, key: dg.AssetKey) -> dict[str, set[str]]:
        """The asset's partitions by status: materializedPartitions, failedPartitions, ..."""
        data = self.graphql(
            """query($key: AssetKeyInput!) { assetNodeOrError(assetKey: $key) { ... on AssetNode {
                 assetPartitionStatuses { ... on DefaultPartitionStatuses {
                   materializedPartitions failedPartitions materializingPartitions } } } } }""",
            {"key": {"path": key.path}},
        )
        statuses = data["assetNodeOrError"]["assetPartitionStatuses"]
        return {status: set(partitions) for status, partitions in statuses.items()}

    def sensor_state(self, sensor: str) -> dict:
        data = self.graphql(
            f"""query($sensor: String!) {{ sensorOrError(sensorSelector: {SENSOR_SELECTOR}) {{
                 ... on Sensor {{ sensorState {{ id selectorId status }} }} }} }}""",
            {"sensor": sensor},
        )
        return data["sensorOrError"]["sensorState"]

    def ticks(self, sensor: str, limit: int) -> list[dict]:
        """The sensor's latest ticks, newest first, as its *Automation* page lists them: timestamp,
        status (STARTED while one still evaluates), runIds, skipReason."""
        data = self.graphql(
            f"""query($sensor: String!, $limit: Int) {{ sensorOrError(sensorSelector: {SENSOR_SELECTOR}) {{
                 ... on Sensor {{ sensorState {{ ticks(limit: $limit) {{
                   timestamp status runIds skipReason }} }} }} }} }}""",
            {"sensor": sensor, "limit": limit},
        )
        return data["sensorOrError"]["sensorState"]["ticks"]

    def latest_ended_tick(self, sensor: str) -> dict | None:
        """The sensor's latest tick that ended. A tick is stamped when it starts: one still
        evaluating may yet request runs."""
        return next((tick for tick in self.ticks(sensor, 3) if tick["status"] != "STARTED"), None)

    def stop_probe_scoring(self) -> None:
        """The `stale_losses` sensor switched off while the daemon runs, for a test whose subject is
        not probe losses (test_source_deletion and bench/celery_arrivals score them): the shipped
        `demo` recipe's probe would score every dump in a run of its own, ~3.5 CPU-seconds each.
        Where the test starts the daemon itself, `sensors_off=(PROBE_SCORING_SENSOR,)` does it
        before the daemon's first tick."""
        self.stop_sensor(PROBE_SCORING_SENSOR)

    def stop_sensor(self, sensor: str) -> None:
        """The sensor's *Running* toggle switched off, until it stays off. A tick under way when it is
        switched still ends and requests its runs (it may list a folder written after the switch),
        and the daemon, as it starts a tick, writes back the state it read just before: a switch
        made in between is undone (seen: `stale_losses` kept ticking after a test switched it off as
        the daemon came up). So: switch, wait for the tick under way to end, and look again. A tick
        the daemon's loop is about to start, having read the state just before the switch, may still
        come: a test that must exclude it passes the sensor in `sensors_off` instead."""
        for _ in range(3):
            state = self.sensor_state(sensor)
            data = self.graphql(
                """mutation($origin: String, $selector: String) {
                     stopSensor(jobOriginId: $origin, jobSelectorId: $selector) {
                       ... on StopSensorMutationResult { instigationState { status } } } }""",
                {"origin": state["id"], "selector": state["selectorId"]},
            )
            assert data["stopSensor"]["instigationState"]["status"] == "STOPPED"
            wait_for(f"the tick of {sensor} under way to end", lambda: not self._tick_under_way(sensor),
                     RUN_TIMEOUT, logs=self.logs)
            if self.sensor_state(sensor)["status"] == "STOPPED":
                return
        raise AssertionError(f"{sensor} was switched off three times and each time the daemon switched it on again")

    def _tick_under_way(self, sensor: str) -> bool:
        return [tick["status"] for tick in self.ticks(sensor, 1)] == ["STARTED"]

    def start_sensor(self, sensor: str) -> None:
        """The sensor's *Running* toggle switched on."""
        data = self.graphql(
            f"""mutation($sensor: String!) {{ startSensor(sensorSelector: {SENSOR_SELECTOR}) {{
                 ... on Sensor {{ sensorState {{ status }} }} }} }}""",
            {"sensor": sensor},
        )
        assert data["startSensor"]["sensorState"]["status"] == "RUNNING"

    def stale_status(self, key: dg.AssetKey, partition: str) -> tuple[str, list[str]]:
        """What the UI says of one partition: FRESH, STALE or MISSING, and the root causes of its
        staleness as `asset[partition]: reason`."""
        data = self.graphql(
            """query($key: AssetKeyInput!, $partition: String!) { assetNodeOrError(assetKey: $key) {
                 ... on AssetNode { staleStatus(partition: $partition)
                   staleCauses(partition: $partition) { key { path } partitionKey reason } } } }""",
            {"key": {"path": key.path}, "partition": partition},
        )
        node = data["assetNodeOrError"]
        causes = [
            f"{dg.AssetKey(c['key']['path']).to_user_string()}[{c['partitionKey']}]: {c['reason']}"
            for c in node["staleCauses"]
        ]
        return node["staleStatus"], causes

    def assert_serves_instance_config(self, instance_yaml: Path) -> None:
        """The services run on `instance_yaml`'s run queue and pools, and every required daemon is healthy."""
        config = yaml.safe_load(instance_yaml.read_text())
        data = self.graphql(
            "{ instance { runQueueConfig { maxConcurrentRuns } poolConfig { poolGranularity defaultPoolLimit } } }"
        )["instance"]
        assert data["runQueueConfig"]["maxConcurrentRuns"] == config["concurrency"]["runs"]["max_concurrent_runs"]
        assert data["poolConfig"] == {
            "poolGranularity": config["concurrency"]["pools"]["granularity"],
            "defaultPoolLimit": config["concurrency"]["pools"]["default_limit"],
        }

        def healthy() -> bool:
            statuses = self.graphql(
                "{ instance { daemonHealth { allDaemonStatuses { daemonType required healthy } } } }"
            )["instance"]["daemonHealth"]["allDaemonStatuses"]
            return all(s["healthy"] for s in statuses if s["required"])

        wait_for("every required daemon to report healthy", healthy, 120, every=2, logs=self.logs)

    def idle(self) -> bool:
        """No run queued or in progress."""
        return all(run["status"] in ("SUCCESS", "FAILURE", "CANCELED") for run in self.runs({}))

    def materialization_run(self, key: dg.AssetKey, partition: str) -> str | None:
        """The run id of the asset's latest materialization of `partition`."""
        data = self.graphql(
            """query($key: AssetKeyInput!, $partition: String!) { assetNodeOrError(assetKey: $key) {
                 ... on AssetNode { assetMaterializations(partitions: [$partition], limit: 1) { runId } } } }""",
            {"key": {"path": key.path}, "partition": partition},
        )
        found = data["assetNodeOrError"]["assetMaterializations"]
        return found[0]["runId"] if found else None

    def check_executions(self, check: dg.AssetCheckKey, partition: str | None, limit: int) -> list[dict]:
        """A check's executions, newest first: of one partition, or of all (`partition` None)."""
        data = self.graphql(
            """query($key: AssetKeyInput!, $check: String!, $partition: String, $limit: Int!) {
                 assetCheckExecutions(assetKey: $key, checkName: $check, partition: $partition, limit: $limit) {
                   runId partition status evaluation { partition targetMaterialization { runId } } } }""",
            {"key": {"path": check.asset_key.path}, "check": check.name, "partition": partition, "limit": limit},
        )
        return data["assetCheckExecutions"]


def chain_asset_keys() -> list[dg.AssetKey]:
    """Every asset of one dump's chain: its signing (what a backfill selects) and its decisions and
    token files (what automation runs after)."""
    return sorted(dg.AssetSelection.groups(SIGNING_GROUP, KEPT_GROUP).resolve(defs.resolve_asset_graph()))


def signing_asset_keys() -> list[dg.AssetKey]:
    """The assets of a dump's signing run (the `dump_signing` job): what a backfill of dumps selects."""
    return sorted(signing_job.selection.resolve(defs.resolve_asset_graph()))


def kept_asset_keys() -> list[dg.AssetKey]:
    """The assets of a dump's decision run (group `fineweb_edu_kept`), which automation starts."""
    return sorted(dg.AssetSelection.groups(KEPT_GROUP).resolve(defs.resolve_asset_graph()))


def chain_checks(keys: list[dg.AssetKey] | None = None) -> list[dg.AssetCheckKey]:
    """The asset checks of `keys` (default: the whole chain)."""
    graph = defs.resolve_asset_graph()
    keys = set(keys or chain_asset_keys())
    return sorted((c for c in graph.asset_check_keys if c.asset_key in keys), key=lambda key: key.to_user_string())


def failure_messages(run: dict) -> list[str]:
    events = run["eventConnection"]["events"]
    return [
        f"{event.get('stepKey', 'run')}: {event['error']['message'] if 'error' in event else event['message']}"
        for event in events
        if event["__typename"] in ("ExecutionStepFailureEvent", "RunFailureEvent")
    ]


def tag(run: dict, key: str) -> str | None:
    return next((t["value"] for t in run["tags"] if t["key"] == key), None)


def run_partition(run: dict) -> str | None:
    """The one dump a run processed: a partition tag, or a backfill's one-partition range."""
    start = tag(run, "dagster/asset_partition_range_start")
    end = tag(run, "dagster/asset_partition_range_end")
    return tag(run, "dagster/partition") or (start if start == end else None)


def assert_steps_succeeded(run: dict, keys: list[dg.AssetKey]) -> None:
    """The steps of `keys` (a dump's signing, or its decisions) and of their checks that run apart
    (`published_files`) ran and succeeded in this one run, and each of their asset checks passed in it."""
    checks = chain_checks(keys)
    steps = {stat["stepKey"]: stat["status"] for stat in run["stepStats"]}
    separate = {f"{c.asset_key.to_python_identifier()}_{c.name}" for c in checks} & set(steps)
    expected = {key.to_python_identifier() for key in keys} | separate
    assert steps == dict.fromkeys(expected, "SUCCESS"), f"run {run['runId']}: {steps}"
    evaluated = {
        dg.AssetCheckKey(dg.AssetKey(e["evaluation"]["assetKey"]["path"]), e["evaluation"]["checkName"])
        .to_user_string(): e["evaluation"]["success"]
        for e in run["eventConnection"]["events"]
        if e["__typename"] == "AssetCheckEvaluationEvent"
    }
    assert evaluated == {check.to_user_string(): True for check in checks}, f"run {run['runId']}: {evaluated}"


def assert_every_asset_materialized(services: DagsterServices, dumps: list[str]) -> None:
    """Each dump's partition of every chain asset reads *materialized* in the UI (not failed, not missing)."""
    problems = []
    for key in chain_asset_keys():
        statuses = services.partition_statuses(key)
        for dump in dumps:
            if dump not in statuses["materializedPartitions"] or dump in statuses["failedPartitions"]:
                status = [name for name, partitions in statuses.items() if dump in partitions] or ["missing"]
                problems.append(f"{key.to_user_string()} [{dump}]: {', '.join(status)}")
    assert not problems, "partitions not materialized:\n" + "\n".join(problems)


def decided_after(services: DagsterServices, since: float) -> dict | None:
    """The decisions' automation's latest evaluation, once it came after `since` and no run is
    left: nothing more will be requested for what happened before `since`."""
    tick = services.latest_ended_tick(DECISIONS_SENSOR)
    return tick if tick and tick["timestamp"] > since and services.idle() else None


def backfill_again_then_cli(services: DagsterServices, dumps: list[str], env: dict[str, str], cwd: Path) -> list[dict]:
    """The first two of `dumps` (crawl order) backfilled again from the same files, then the third
    materialized from the CLI, the decisions' automation on throughout. Returns every run launched
    from then until the automation has evaluated after the CLI's run and no run is left."""
    wait_for("every run to end", lambda: decided_after(services, 0), 300, every=3, logs=services.logs)
    earlier = {run["runId"] for run in services.runs({})}
    backfill_id = services.launch_backfill(signing_asset_keys(), dumps[:2])
    services.wait_for_runs("the repeated backfill's runs", {"dagster/backfill": backfill_id}, 2)
    dagster_cli("asset", "materialize", "-m", "fw_assets.definitions", "--select", DUMP_CLI_SELECTION,
                "--partition", dumps[2], env=env, cwd=cwd)
    cli_finished = time.time()
    wait_for("the decisions' automation to evaluate after the CLI's run", lambda: decided_after(services, cli_finished),
             240, every=3, logs=services.logs)
    return [run for run in services.runs({}) if run["runId"] not in earlier]


def assert_check_results_belong_to_their_dumps(services: DagsterServices, dumps: list[str]) -> None:
    """What a user sees under an asset → *Checks* → a dump: for every check of the chain and each dump,
    the latest execution is of that dump's partition, SUCCEEDED, and evaluated that dump's own
    materialization (same run); and no execution of any partition is left planned (a planned
    execution reads IN_PROGRESS while its run lives, SKIPPED once it ended). Waits for the runs a
    sensor may have launched meanwhile to end first. Lists every problem."""
    wait_for("every run to end", services.idle, RUN_TIMEOUT, every=3, logs=services.logs)
    problems = []
    for check in chain_checks():
        name = check.to_user_string()
        for dump in dumps:
            problems += attribution_problems(services, check, dump)
        for execution in services.check_executions(check, None, limit=100):
            if execution["status"] != "SUCCEEDED":
                problems.append(f"{name}: execution in run {execution['runId']} (partition "
                                f"{execution['partition']}) is {execution['status']}, never evaluated")
    assert not problems, f"{len(problems)} check results not attributed to their dump:\n" + "\n".join(problems)


def attribution_problems(services: DagsterServices, check: dg.AssetCheckKey, dump: str) -> list[str]:
    """What is wrong with the latest execution of `check` on `dump`: not of that dump, not passed, or
    not evaluating the dump's latest materialization."""
    where = f"{check.to_user_string()} [{dump}]"
    latest = services.check_executions(check, dump, limit=1)
    if not latest:
        return [f"{where}: no execution recorded with this partition"]
    execution, evaluation = latest[0], latest[0]["evaluation"] or {}
    materialized_in = services.materialization_run(check.asset_key, dump)
    target = (evaluation.get("targetMaterialization") or {}).get("runId")
    problems = []
    if execution["partition"] != dump or evaluation.get("partition") != dump:
        problems.append(f"{where}: partition {execution['partition']}, evaluation's {evaluation.get('partition')}")
    if execution["status"] != "SUCCEEDED":
        problems.append(f"{where}: status {execution['status']}")
    if target != materialized_in:
        problems.append(f"{where}: evaluated materialization of run {target}, the dump's is run {materialized_in}")
    return problems


def descendants(pid: int) -> set[int]:
    """Every living process below `pid`, from /proc (run workers may start their own sessions)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _signal_group(group: int, sig: int) -> None:
    try:
        os.killpg(group, sig)
    except ProcessLookupError:
        pass


def _signal_pid(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def find_chromium() -> str | None:
    """Debian's `chromium` (installed by .ci/run), or another Chromium/Chrome on PATH."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if found := shutil.which(name):
            return found
    return None


class HeadlessChromium:
    """A headless Chromium driven over the DevTools protocol: open a page, read its text, screenshot."""

    def __init__(self, executable: str, width: int = 1600, height: int = 1000):
        self.profile = Path(tempfile.mkdtemp(prefix="fw-chromium-"))
        self.process = subprocess.Popen(
            [executable, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--no-first-run", "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
             f"--user-data-dir={self.profile}", f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )
        port_file = self.profile / "DevToolsActivePort"
        wait_for("Chromium's DevTools port", lambda: port_file.exists() and port_file.read_text(), 60, 0.2)
        port = int(port_file.read_text().split()[0])
        target = requests.put(f"http://127.0.0.1:{port}/json/new?about:blank", timeout=30).json()
        self.connection = ExitStack()
        self.socket = self.connection.enter_context(
            connect(target["webSocketDebuggerUrl"], max_size=None, open_timeout=30)
        )
        self.next_id = 0
        self.events: list[dict] = []  # what the enabled DevTools domains reported, in order

    def command(self, method: str, **params) -> dict:
        self.next_id += 1
        self.socket.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:  # events arrive in between; kept in `events`
            message = json.loads(self.socket.recv(timeout=60))
            if message.get("id") == self.next_id:
                assert "error" not in message, f"{method}: {message['error']}"
                return message["result"]
            if "method" in message:
                self.events.append(message)

    def open(self, url: str) -> None:
        self.command("Page.navigate", url=url)

    def text(self) -> str:
        """What a user reads on the page (the body's rendered text)."""
        return self.evaluate("document.body ? document.body.innerText : ''") or ""

    def evaluate(self, expression: str) -> Any:
        return self.command("Runtime.evaluate", expression=expression, returnByValue=True)["result"].get("value")

    def click(self, what: str, selector: str, text: str | None = None, timeout: float = 60) -> None:
        """Click (as a user would) the first element matching `selector` (whose text is `text`, if
        given), waiting until the page shows one."""
        expression = f"""(() => {{
            const found = [...document.querySelectorAll({json.dumps(selector)})]
                .find(element => {json.dumps(text)} === null || element.textContent.trim() === {json.dumps(text)});
            if (found) found.click();
            return Boolean(found);
        }})()"""
        wait_for(f"{what} to click", lambda: self.evaluate(expression), timeout, 0.5)

    def links(self) -> list[str]:
        """The address of every link on the page."""
        return self.evaluate("[...document.querySelectorAll('a[href]')].map(a => a.href)")

    def wait_for_text(
        self, what: str, expected: list[str], absent: tuple[str, ...] = (), timeout: float = 60
    ) -> str:
        """Wait until every string in `expected` and none in `absent` is on the page; return its text."""

        def shown() -> str | None:
            text = self.text()
            return text if all(e in text for e in expected) and not any(a in text for a in absent) else None

        try:
            return wait_for(what, shown, timeout, 0.5)
        except AssertionError as error:
            text = self.text()
            missing = [e for e in expected if e not in text]
            unwanted = [a for a in absent if a in text]
            raise AssertionError(f"{error}\nmissing {missing}, unwanted {unwanted}; page: {text[:1500]}") from None

    def screenshot(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(self.command("Page.captureScreenshot", format="png")["data"]))
        return path

    def close(self) -> None:
        try:
            self.connection.close()
        finally:
            _signal_group(self.process.pid, signal.SIGKILL)
            self.process.wait()
            shutil.rmtree(self.profile, ignore_errors=True)


EVALUATIONS = """query($key: AssetKeyInput!) { assetConditionEvaluationRecordsOrError(assetKey: $key, limit: 200) {
  ... on AssetConditionEvaluationRecords { records { evaluationId timestamp numRequested runIds
    evaluationNodes { uniqueId userLabel expandedLabel numTrue } } } } }"""
TRUE_PARTITIONS = """query($key: AssetKeyInput!, $id: ID!, $node: String!) {
  truePartitionsForAutomationConditionEvaluationNode(assetKey: $key, evaluationId: $id, nodeUniqueId: $node) }"""


def why_requested(services: DagsterServices, key: dg.AssetKey, partition: str) -> list[str]:
    """Each automation evaluation that requested `partition` of `key`, a line each: when, its runs,
    and the labelled parts of its condition that were true for the partition (what the UI shows
    under the asset's *Automation*)."""
    records = services.graphql(EVALUATIONS, {"key": {"path": key.path}})["assetConditionEvaluationRecordsOrError"]
    lines = []
    for record in records.get("records", []):
        if not record["numRequested"]:
            continue
        true = []
        for node in record["evaluationNodes"]:
            label = node["userLabel"] or " ".join(node["expandedLabel"])[:60]
            found = services.graphql(TRUE_PARTITIONS, {"key": {"path": key.path}, "id": record["evaluationId"],
                                                       "node": node["uniqueId"]})
            if partition in found["truePartitionsForAutomationConditionEvaluationNode"]:
                true.append(label)
        if true and true[0]:
            lines.append(f"{record['timestamp']:.1f} runs {record['runIds']}: " + "; ".join(true))
    return lines


def launched_by(run: dict) -> str:
    """Who launched a run, as the UI's run list shows it: a sensor, a backfill, or neither (the CLI,
    a person)."""
    for key in ("dagster/sensor_name", "dagster/backfill", "dagster/parent_run_id"):
        if value := tag(run, key):
            return f"{key.split('/')[1]} {value}"
    return "the CLI or a person"


def describe_runs(runs: list[dict]) -> list[str]:
    """A line per run: its dump, status, launcher and the steps it ran; what a test prints when a
    dump was run more often than it asserts."""
    return [f"{run_partition(run)} {run['status']} run {run['runId'][:8]} by {launched_by(run)}: "
            + " ".join(step["stepKey"] for step in run["stepStats"]) for run in runs]


def why_each_requested(services: DagsterServices, keys: list[dg.AssetKey], dumps: list[str]) -> list[str]:
    """`why_requested` of every dump of `dumps` for each of `keys`, a line each led by `key[dump]`:
    what a test prints when a dump was requested more or less often than it asserts."""
    return [f"{key.to_user_string()}[{dump}] requested: {line}" for key in keys for dump in dumps
            for line in why_requested(services, key, dump)]

