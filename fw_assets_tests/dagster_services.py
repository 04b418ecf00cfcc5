"""Real Dagster services for end-to-end tests: a webserver and a daemon, their GraphQL API, and a
headless Chromium to look at the UI. Everything started here is stopped by `stop()`/`close()`."""

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
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import requests
import yaml
from dagster import DagsterInstance
from dagster._core.instance.ref import InstanceRef
from websockets.sync.client import connect

REPO_ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
STOP_GRACE_SECONDS = 30


def write_instance_yaml(home: Path) -> Path:
    """The repo's dagster.yaml in a private DAGSTER_HOME, its relative `.dagster/` folders moved
    under that home, so whatever folder a command starts in, nothing lands in the repo's `.dagster/`."""

    def anchored(node):
        if isinstance(node, dict):
            return {key: anchored_value(key, value) for key, value in node.items()}
        return node

    def anchored_value(key, value):
        relative_folder = key == "base_dir" and not Path(value).is_absolute()
        return str(home / value) if relative_folder else anchored(value)

    config = yaml.safe_load((REPO_ROOT / "dagster.yaml").read_text())
    path = home / "dagster.yaml"
    path.write_text(yaml.safe_dump(anchored(config), sort_keys=False))
    return path


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
    """`dagster-webserver` and `dagster-daemon run` over workspace.yaml with a private instance."""

    def __init__(self, home: Path, env: dict[str, str]):
        self.home = home
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        workspace = str(REPO_ROOT / "workspace.yaml")
        full_env = {**os.environ, **env, "DAGSTER_HOME": str(home)}
        # Create the SQLite schemas first: two services creating them at once race on alembic's stamp.
        DagsterInstance.from_ref(InstanceRef.from_dir(str(home))).dispose()
        self.services = [
            Service("webserver", [str(BIN / "dagster-webserver"), "-h", "127.0.0.1", "-p", str(self.port),
                                  "-w", workspace], home, full_env),
            Service("daemon", [str(BIN / "dagster-daemon"), "run", "-w", workspace], home, full_env),
        ]

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

    def command(self, method: str, **params) -> dict:
        self.next_id += 1
        self.socket.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:  # events arrive in between; skip them
            message = json.loads(self.socket.recv(timeout=60))
            if message.get("id") == self.next_id:
                assert "error" not in message, f"{method}: {message['error']}"
                return message["result"]

    def open(self, url: str) -> None:
        self.command("Page.navigate", url=url)

    def text(self) -> str:
        """What a user reads on the page (the body's rendered text)."""
        result = self.command(
            "Runtime.evaluate", expression="document.body ? document.body.innerText : ''", returnByValue=True
        )
        return result["result"].get("value", "")

    def wait_for_text(
        self, what: str, expected: list[str], absent: tuple[str, ...] = (), timeout: float = 60
    ) -> str:
        """Wait until every string in `expected` and none in `absent` is on the page; return its text."""

        def shown() -> str | None:
            text = self.text()
            return text if all(e in text for e in expected) and not any(a in text for a in absent) else None

        return wait_for(what, shown, timeout, 0.5)

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
