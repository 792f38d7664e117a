"""``make demo`` (``python -m spiders_project.demo``) and the production supervisor config."""

from __future__ import annotations

import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import redis
from supervisor.options import ServerOptions

from spiders_project.config import load_settings
from spiders_project.demo.redis_server import PrivateRedis
from spiders_project.demo.supervisor import render_config
from tests.support.processes import K
from tests.support.services import RedisServer

ROOT = Path(__file__).resolve().parents[2]
CRAWLER_CONF = ROOT / "deploy" / "supervisor" / "crawler.conf"


def demo_env(redis_url: str, db_path: Path) -> dict[str, str]:
    return {**os.environ, "REDIS_URL": redis_url, "DB_URL": f"sqlite:///{db_path}"}


def demo_argv(run_dir: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "spiders_project.demo", "--run-dir", str(run_dir), *args]


def spawned_pids(run_dir: Path) -> list[int]:
    """supervisord's PID and those of every program it spawned, from its log."""
    log = (run_dir / "supervisord.log").read_text()
    return [int(pid) for pid in re.findall(r"(?:spawned: '\S+'|started) with pid (\d+)", log)]


def processes_mentioning(marker: str) -> list[str]:
    """Live processes whose command line or environment contains ``marker``."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            text = " ".join(proc.cmdline()) + " " + " ".join(proc.environ().values())
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if marker in text:
            found.append(f"{proc.pid} {' '.join(proc.cmdline())}")
    return found


def running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def assert_nothing_left(run_dir: Path) -> None:
    assert [pid for pid in spawned_pids(run_dir) if running(pid)] == []
    assert processes_mentioning(str(run_dir)) == []


@pytest.mark.slow
def test_demo_stores_every_page_once_and_stops_everything(redis_url, r, tmp_path):
    db_path, run_dir = tmp_path / "items.db", tmp_path / "run"
    done = subprocess.run(
        demo_argv(run_dir, "--timeout", "200"),
        env=demo_env(redis_url, db_path),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=280,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "demo: OK: all 300 pages of the demo site are in the database exactly once" in out
    assert re.search(
        r"pages crawled: 300 of 300 in [\d.]+ s \([\d.]+ pages/s with 2 workers\)", out
    ), out
    assert f"items in the database: 300 in {db_path}" in out
    assert re.search(r"demo: \[ *[\d.]+s\] pages crawled \d+/300 \| items in DB \d+ \|", out), out
    assert "Traceback" not in out
    with sqlite3.connect(db_path) as db:
        counts = db.execute("SELECT count(*), count(DISTINCT url) FROM items").fetchone()
    assert counts == (300, 300)

    # Two workers and the db_writer ran under supervisord, and all of them are gone.
    log = (run_dir / "supervisord.log").read_text()
    assert {"worker-00", "worker-01", "db_writer"} <= set(re.findall(r"spawned: '(\S+)'", log))
    assert len(spawned_pids(run_dir)) >= 4
    assert_nothing_left(run_dir)
    for name in ("worker-00", "worker-01", "db_writer"):
        program_log = (run_dir / "logs" / f"{name}.log").read_text()
        assert "Traceback" not in program_log, program_log[-3000:]
        assert re.search(rf"stopped: {name} \(exit status 0\)", log), log
    # The demo cleans up the keys it created in a Redis it did not start.
    assert r.keys(f"{K.spider}:*") == []


@pytest.fixture
def tls_redis(pki) -> Iterator[RedisServer]:
    server = RedisServer(tls=pki)
    yield server
    server.stop()


@pytest.mark.slow
def test_demo_over_tls_refuses_a_redis_holding_crawl_state_unless_reset(tls_redis, tmp_path):
    """The demo on a Redis of one's own, over TLS (``rediss://``, certificate and
    host name verified): its own client, its workers, db_writer and exporter."""
    r = tls_redis.client
    r.lpush(K.start_urls, "http://example.invalid/")
    run_dir, env = tmp_path / "run", demo_env(tls_redis.url, tmp_path / "items.db")
    refused = subprocess.run(
        demo_argv(run_dir), env=env, cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "--reset" in refused.stdout and "Traceback" not in refused.stderr
    assert r.lrange(K.start_urls, 0, -1) == [b"http://example.invalid/"]
    assert not (run_dir / "supervisord.log").exists()

    reset = subprocess.run(
        demo_argv(run_dir, "--reset", "--pages", "20", "--timeout", "120"),
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    out = reset.stdout + reset.stderr
    assert reset.returncode == 0, out
    assert f"--reset: deleted 1 {K.spider}:* keys" in out
    assert "OK: all 20 pages of the demo site are in the database exactly once" in out
    assert_nothing_left(run_dir)


@pytest.mark.slow
def test_sigterm_stops_the_demo_and_everything_it_started(redis_url, r, tmp_path):
    run_dir = tmp_path / "run"
    demo = subprocess.Popen(
        demo_argv(run_dir, "--pages", "3000"),
        env=demo_env(redis_url, tmp_path / "items.db"),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        lines = []
        for line in demo.stdout:
            lines.append(line)
            if "seeded:" in line:
                break
        time.sleep(1.0)
        demo.send_signal(signal.SIGTERM)
        rest, _ = demo.communicate(timeout=120)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    out = "".join(lines) + rest
    assert demo.returncode == 128 + signal.SIGTERM, out
    assert "SIGTERM: stopping everything the demo started" in out
    assert "Traceback" not in out
    assert_nothing_left(run_dir)
    assert r.keys(f"{K.spider}:*") == []


def test_private_redis_answers_and_is_gone_after_stop(tmp_path):
    server = PrivateRedis(tmp_path / "redis.log")
    try:
        url = server.start()
        client = redis.Redis.from_url(url)
        assert client.ping()
        assert client.config_get("save") == {"save": ""}
        client.close()
    finally:
        server.stop()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", server.port), timeout=5).close()


def test_production_supervisor_config_parses(tmp_path, monkeypatch):
    """crawler.conf, included from a main config as Debian's supervisor package does."""
    main = tmp_path / "supervisord.conf"
    main.write_text(
        f"[supervisord]\nlogfile={tmp_path}/supervisord.log\npidfile={tmp_path}/supervisord.pid\n"
        f"[include]\nfiles={CRAWLER_CONF}\n"
    )
    monkeypatch.setenv("CRAWLER_HOME", "/opt/crawler")
    monkeypatch.setenv("CRAWLER_LOG_DIR", str(tmp_path))
    monkeypatch.setenv("CRAWLER_WORKERS", "3")
    monkeypatch.setenv("CRAWLER_RENDER_WORKERS", "1")
    options = ServerOptions()
    options.realize(["-c", str(main)])
    assert options.parse_warnings == []
    [group] = options.process_group_configs
    assert group.name == "crawler"
    procs = {p.name: p for p in group.process_configs}
    assert sorted(procs) == [
        "db_writer",
        "monitor",
        "render-00",
        "worker-00",
        "worker-01",
        "worker-02",
    ]
    run_with_env = "/opt/crawler/deploy/supervisor/run-with-env"
    worker = procs["worker-01"]
    assert worker.command == f"{run_with_env} /opt/crawler/.venv/bin/scrapy crawl distributed"
    assert worker.directory == "/opt/crawler"
    assert worker.stopsignal == signal.SIGTERM
    settings = load_settings()
    drain = settings.getfloat("SHUTDOWN_GRACE_PERIOD") + settings.getfloat("FRONTIER_CLOSE_TIMEOUT")
    assert worker.stopwaitsecs > drain  # supervisord's SIGKILL comes after the warm shutdown
    assert worker.stdout_logfile == f"{tmp_path}/worker-01.log"
    # The render pool: the same program, told to lease only requests that render.
    render = procs["render-00"]
    assert render.command == worker.command + " -s WORKER_ROLE=render"
    assert render.stopwaitsecs == worker.stopwaitsecs and render.killasgroup
    assert procs["db_writer"].command.endswith(
        "/.venv/bin/python -m spiders_project.db_writer --all-spiders"
    )
    assert procs["monitor"].command.endswith("/.venv/bin/python -m monitor")
    for proc in procs.values():
        assert proc.autorestart is not False and proc.redirect_stderr
        assert proc.command.startswith(run_with_env)
    # Started in order monitor, db_writer, workers.
    assert procs["monitor"].priority < procs["db_writer"].priority < worker.priority
    assert os.access(ROOT / "deploy" / "supervisor" / "run-with-env", os.X_OK)


def test_run_with_env_exports_the_env_file_and_keeps_the_pid(tmp_path):
    env_file = tmp_path / "env"
    env_file.write_text("REDIS_URL='redis://:p w@h:1/0'\nLOG_LEVEL=DEBUG\n")
    script = ROOT / "deploy" / "supervisor" / "run-with-env"
    probe = "import os; print(os.getpid(), os.environ['REDIS_URL'], os.environ['LOG_LEVEL'])"
    proc = subprocess.Popen(
        [str(script), sys.executable, "-c", probe],
        env={**os.environ, "CRAWLER_ENV_FILE": str(env_file), "LOG_LEVEL": "INFO"},
        stdout=subprocess.PIPE,
        text=True,
    )
    out, _ = proc.communicate(timeout=30)
    assert out.split(" ", 1) == [str(proc.pid), "redis://:p w@h:1/0 DEBUG\n"]
    missing = subprocess.run(
        [str(script), "true"],
        env={**os.environ, "CRAWLER_ENV_FILE": str(tmp_path / "none")},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert missing.returncode == 78 and "cannot read the env file" in missing.stderr


@pytest.mark.parametrize("with_monitor", [False, True])
def test_demo_config_is_the_production_one_with_its_own_supervisord(tmp_path, with_monitor):
    env = {
        "CRAWLER_HOME": str(ROOT),
        "CRAWLER_ENV_FILE": str(tmp_path / "crawler.env"),
        "CRAWLER_LOG_DIR": str(tmp_path),
        "CRAWLER_WORKERS": "2",
        "CRAWLER_RENDER_WORKERS": "0",
    }
    (tmp_path / "logs").mkdir()  # childlogdir, made by Supervisor.start in the demo
    conf = tmp_path / "supervisord.conf"
    conf.write_text(render_config(tmp_path, environment=env, with_monitor=with_monitor))
    options = ServerOptions()  # the environment comes from [supervisord] environment=
    options.realize(["-c", str(conf)])
    assert options.parse_warnings == []
    assert options.serverurl == f"unix://{tmp_path}/supervisor.sock"
    [group] = options.process_group_configs
    names = sorted(p.name for p in group.process_configs)
    expected = ["db_writer", "worker-00", "worker-01"]
    assert names == (sorted([*expected, "monitor"]) if with_monitor else expected)
    for proc in group.process_configs:
        assert proc.command.startswith(f"{ROOT}/deploy/supervisor/run-with-env {ROOT}/.venv/bin/")
        assert proc.startretries == 3
