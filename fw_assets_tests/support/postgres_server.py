"""A real PostgreSQL server for end-to-end tests: Debian's `postgresql` binaries, a fresh cluster in a
temp folder, listening on a free port on 127.0.0.1 with password authentication, stopped by `stop()`.

initdb refuses to run as root, so as root the server runs as the `postgres` user (which Debian's
package creates) through `runuser`; as anyone else it runs as that user."""

import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench.dagster_services import free_port

SERVER_USER = "postgres"  # the system user Debian's package creates; only used when we are root
DEBIAN_BINARIES = Path("/usr/lib/postgresql")


def find_postgres_binaries() -> Path | None:
    """The folder holding initdb and pg_ctl: the newest Debian version, else the ones on PATH."""
    debian = sorted(DEBIAN_BINARIES.glob("*/bin"), key=lambda p: int(p.parent.name), reverse=True)
    for folder in debian:
        if (folder / "initdb").is_file() and (folder / "pg_ctl").is_file():
            return folder
    initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
    if initdb and pg_ctl and Path(initdb).parent == Path(pg_ctl).parent:
        return Path(initdb).parent
    return None


@dataclass(frozen=True)
class Database:
    host: str
    port: int
    username: str
    password: str
    name: str

    def dagster_env(self) -> dict[str, str]:
        """The DAGSTER_PG_* variables that deploy/dagster.postgres.yaml reads."""
        return {
            "DAGSTER_PG_HOST": self.host,
            "DAGSTER_PG_PORT": str(self.port),
            "DAGSTER_PG_USERNAME": self.username,
            "DAGSTER_PG_PASSWORD": self.password,
            "DAGSTER_PG_DB": self.name,
        }


class PostgresServer:
    """initdb + pg_ctl start in a private folder; `database` is an empty database and its owner."""

    def __init__(self, binaries: Path, database: str = "fw_dagster", username: str = "fw_dagster"):
        self.binaries = binaries
        self.as_server_user = ["runuser", "-u", SERVER_USER, "--"] if os.geteuid() == 0 else []
        self.root = Path(tempfile.mkdtemp(prefix="fw-postgres-"))
        if self.as_server_user:
            account = pwd.getpwnam(SERVER_USER)
            os.chown(self.root, account.pw_uid, account.pw_gid)
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        # Characters that need quoting in a URL: the instance config must escape them.
        self.database = Database("127.0.0.1", free_port(), username, f"p@ss:{secrets.token_hex(8)}", database)
        self.started = False
        self._start()

    def _run(self, *command: str, input: str | None = None) -> None:
        result = subprocess.run(
            [*self.as_server_user, *command], input=input, capture_output=True, text=True, timeout=120,
            env={**os.environ, "PGPASSWORD": self.database.password},
        )
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")

    def _start(self) -> None:
        db = self.database
        password_file = self.root / "password"
        password_file.write_text(db.password + "\n")
        if self.as_server_user:
            shutil.chown(password_file, SERVER_USER)
        self._run(str(self.binaries / "initdb"), "-D", str(self.data), "-U", db.username,
                  "--auth=scram-sha-256", f"--pwfile={password_file}", "--encoding=UTF8", "--locale=C")
        password_file.unlink()
        options = f"-c listen_addresses={db.host} -p {db.port} -c unix_socket_directories={self.root}"
        self._run(str(self.binaries / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-o", options,
                  "-w", "-t", "60", "start")
        self.started = True
        self._run(str(self.binaries / "createdb"), "-h", db.host, "-p", str(db.port), "-U", db.username, db.name)

    def stop(self) -> None:
        try:
            if self.started:
                self._run(str(self.binaries / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")
                self.started = False
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
