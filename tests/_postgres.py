"""A throwaway PostgreSQL server for tests: Debian's `postgresql` binaries (`apt-get install
postgresql`, which .ci/run does) run a private cluster in a temporary folder on a free port, as
the `postgres` user when the tests run as root (initdb refuses root). Or an existing server:
`CIR_TEST_POSTGRES_URL=postgresql://user:pass@host:port/db` (the tests create and drop their
own databases there). `start()` returns an admin URL, or raises `Unavailable` saying why."""
from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path


class Unavailable(RuntimeError):
    """No PostgreSQL server can be started here (the reason is the message)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self) -> None:
        self.dir: Path | None = None
        self.bin: Path | None = None
        self.admin_url: str | None = None
        self.as_user: list[str] = []

    def _run(self, *cmd: str, timeout: float = 120) -> None:
        r = subprocess.run([*self.as_user, *cmd], capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise Unavailable(f"{Path(cmd[0]).name} failed: {(r.stderr or r.stdout).strip()[-400:]}")

    def start(self) -> str:
        url = os.environ.get("CIR_TEST_POSTGRES_URL")
        if url:
            self.admin_url = url
            return url
        try:
            import psycopg  # noqa: F401
        except ImportError:
            raise Unavailable("the psycopg driver is not installed (pip install 'psycopg[binary]')") from None
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
        if not found:
            raise Unavailable("Debian's postgresql is not installed (apt-get install postgresql), "
                              "and CIR_TEST_POSTGRES_URL is not set")
        self.bin = Path(found[-1]).parent
        self.dir = Path(tempfile.mkdtemp(prefix="cir-pg-"))
        if os.geteuid() == 0:  # initdb and postgres refuse to run as root
            try:
                pg = pwd.getpwnam("postgres")
            except KeyError:
                raise Unavailable("running as root and there is no 'postgres' user to run the server") from None
            os.chown(self.dir, pg.pw_uid, pg.pw_gid)
            runuser = shutil.which("runuser")
            if not runuser:
                raise Unavailable("running as root without runuser to start the server as 'postgres'")
            self.as_user = [runuser, "-u", "postgres", "--"]
        data, port = self.dir / "data", _free_port()
        self._run(str(self.bin / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres",
                  "--no-sync", "-E", "UTF8")
        self._run(str(self.bin / "pg_ctl"), "-D", str(data), "-l", str(self.dir / "server.log"), "-w",
                  "-t", "120", "-o", f"-p {port} -k {self.dir} -c listen_addresses=127.0.0.1 "
                  "-c fsync=off -c max_connections=200", "start", timeout=180)
        self.admin_url = f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
        return self.admin_url

    def stop(self) -> None:
        if self.dir is not None and self.bin is not None:
            try:
                self._run(str(self.bin / "pg_ctl"), "-D", str(self.dir / "data"), "-m", "immediate", "stop")
            except (Unavailable, subprocess.TimeoutExpired):
                pass
            shutil.rmtree(self.dir, ignore_errors=True)

    def new_database(self) -> str:
        """A fresh, empty database; its URL."""
        from sqlalchemy import create_engine
        from sqlalchemy.engine import make_url

        from db.sqlite import db_url

        admin = db_url(self.admin_url or "")
        name = f"cir_{uuid.uuid4().hex[:12]}"
        eng = create_engine(admin, isolation_level="AUTOCOMMIT")
        try:
            with eng.connect() as c:
                c.exec_driver_sql(f'CREATE DATABASE "{name}"')
        finally:
            eng.dispose()
        return make_url(admin).set(database=name).render_as_string(hide_password=False)
