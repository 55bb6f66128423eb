"""Background services (Anvil, the IPFS daemon) started and stopped by PID.

A service is described by a small JSON state file in its state directory. ``stop``
only ever signals the PID recorded there, and only if that process still runs the
command we started, so a recycled PID is never killed by mistake.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

LOOPBACK = "127.0.0.1"


class ServiceError(RuntimeError):
    """A local service could not be started, found or stopped."""


@dataclass(frozen=True)
class ServiceState:
    """What ``start_service`` records about a process it started."""

    name: str
    pid: int
    port: int
    command: list[str]
    log: str
    started_at: float
    title: str = ""
    """The name the program gives its own process, when it renames itself."""

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2))
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> ServiceState | None:
        try:
            return cls(**json.loads(path.read_text()))
        except FileNotFoundError:
            return None
        except (ValueError, TypeError) as exc:
            raise ServiceError(f"{path} is not a service state file ({exc}); delete it") from exc


def port_in_use(port: int, host: str = LOOPBACK) -> bool:
    """True when something already listens on ``host:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def wait_for_port(
    port: int, timeout: float, proc: subprocess.Popen[bytes] | None = None, host: str = LOOPBACK
) -> None:
    """Block until ``host:port`` accepts connections; fail early if ``proc`` exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if port_in_use(port, host):
            return
        if proc is not None and proc.poll() is not None:
            raise ServiceError(
                f"process exited with code {proc.returncode} before listening on {host}:{port}"
            )
        time.sleep(0.05)
    raise ServiceError(f"nothing listens on {host}:{port} after {timeout:.0f} s")


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped) counts as dead.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [p.decode(errors="replace") for p in f.read().split(b"\0") if p]
    except OSError:
        return []


def is_running(state: ServiceState) -> bool:
    """True when the recorded PID is alive and still runs the recorded program."""
    if not pid_alive(state.pid):
        return False
    cmd = _cmdline(state.pid)
    # Node programs show up as "node <script>", or under the title they give themselves:
    # compare the program names loosely.
    names = [n for n in (Path(state.command[0]).name, state.title) if n]
    return not cmd or any(n in Path(part).name for n in names for part in cmd[:3])


def start_service(
    name: str,
    command: Sequence[str],
    port: int,
    state_file: Path,
    log_file: Path,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    ready_timeout: float = 30.0,
    title: str = "",
) -> ServiceState:
    """Start ``command`` detached, wait until it listens on ``port``, record it.

    ``title`` is the process name the program sets for itself, if it renames itself
    (js-ipfs calls itself ``ipfs``), so that later PID checks still recognise it.

    Raises :class:`ServiceError` if a service recorded in ``state_file`` still runs or if
    the port is taken, with a message that says what to do.
    """
    previous = ServiceState.load(state_file)
    if previous is not None and is_running(previous):
        raise ServiceError(
            f"{name} is already running (pid {previous.pid}, port {previous.port}); stop it first"
        )
    if port_in_use(port):
        raise ServiceError(
            f"port {port} on {LOOPBACK} is already in use; choose another with "
            f"--port or stop what listens there"
        )
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "ab") as log:
        proc = subprocess.Popen(
            list(command),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
    try:
        wait_for_port(port, ready_timeout, proc)
    except ServiceError as exc:
        if proc.poll() is None:
            proc.kill()
        tail = log_file.read_text(errors="replace")[-2000:]
        raise ServiceError(f"{name} did not start: {exc}\n--- {log_file} ---\n{tail}") from exc
    state = ServiceState(
        name=name,
        pid=proc.pid,
        port=port,
        command=list(command),
        log=str(log_file),
        started_at=time.time(),
        title=title,
    )
    state.save(state_file)
    return state


def stop_service(state_file: Path, timeout: float = 10.0) -> ServiceState | None:
    """Stop the process recorded in ``state_file`` (TERM, then KILL); None if none ran."""
    state = ServiceState.load(state_file)
    if state is None:
        return None
    if is_running(state):
        try:
            os.killpg(state.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + timeout
        while pid_alive(state.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if pid_alive(state.pid):
            try:
                os.killpg(state.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    state_file.unlink(missing_ok=True)
    return state


@contextmanager
def unwind_on_termination(
    signums: Sequence[int] = (signal.SIGTERM, signal.SIGHUP),
) -> Iterator[None]:
    """While the block runs, SIGTERM and SIGHUP raise :class:`KeyboardInterrupt`.

    Python's default for these signals ends the process at once, without running
    ``finally`` clauses, so a ``kill`` (a CI timeout, a closed terminal) would leave the
    block's devnet and workers running as orphans. As an exception, the block unwinds
    and stops what it started. Outside the main thread (where signal handlers cannot be
    set) the block runs unchanged.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"stopped by {signal.Signals(signum).name}")

    previous = {signum: signal.signal(signum, interrupt) for signum in signums}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def project_root() -> Path:
    """The source checkout this package runs from (where package.json lives), or cwd."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "package.json").is_file() and (parent / "pyproject.toml").is_file():
            return parent
    return Path.cwd()


def node_binary(relative: str, env_var: str) -> Path | None:
    """Locate a binary shipped by an npm package.

    Looked up in order: ``$env_var``, the project's ``node_modules``, the user cache
    where ``npm_install`` puts packages when running outside a checkout.
    """
    if os.environ.get(env_var):
        return Path(os.environ[env_var])
    for base in (project_root(), user_node_prefix()):
        candidate = base / "node_modules" / relative
        if candidate.exists():
            return candidate
    return None


def user_node_prefix() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "mcfl-chain" / "node"


def npm_install(packages: Sequence[str], prefix: Path | None = None) -> None:
    """Install npm packages into ``prefix`` (default: the user cache), loudly on failure."""
    npm = shutil.which("npm")
    if npm is None:
        raise ServiceError("npm is not installed: install Node.js (which ships npm) and retry")
    target = prefix or user_node_prefix()
    target.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        [
            npm,
            "install",
            "--prefix",
            str(target),
            "--omit=optional",
            "--no-audit",
            "--no-fund",
            *packages,
        ],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise ServiceError(f"npm install {' '.join(packages)} failed:\n{result.stderr[-2000:]}")
