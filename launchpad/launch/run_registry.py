"""The registry of running programs: what `launchpad ls` lists and the other commands reach.

Every launch whose controller runs in the launching process - local_mt, local_mp, and the
attached cluster launches (slurm, ray) - records its run once `lp.launch` has started it::

    <run_dir>/launchpad-runs-<uid>/<run_id>/run.json     (run_records.py; folder 0700, file 0600)

the run id, program name, launch type and start time; the launching process (its pid, and
what tells it apart from a later process given the same pid: its host, the kernel's boot id,
its pid namespace and its start time); the controller's address, the program's token (and
TLS certificates, if any) and where the nodes' logs are. The launching process removes it
when the program ends. The test_* launch types record nothing: their programs belong to the
test that launched them, and a test suite would churn the user's registry with them.

Detached runs keep records of their own, which their launchers read (`detached_runs()`,
`run_of`: slurm/detached.py, ray/detached.py); `runs()` reads every kind into a
`run_records.Run`, checking each folder and file before reading (no other
user may have been able to write them: private_files.py). A run is listed while its
controller answers, or while it waits to start (a detached Slurm job pending). A record
whose controller does not answer and whose launching process is known to be gone (a
launcher killed before it could remove it) is stale: it is removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import socket
from typing import Any

from launchpad import control
from launchpad.courier import TLS
from launchpad.errors import ControllerProtocolError
from launchpad.launch import launchers
from launchpad.launch.runtime import private_files, run_records
from launchpad.launch.runtime.errors import UnsafePathError

RECORD = "run.json"
_VERSION = 1
_PING_SECS = 2.0  # how long a controller may take to answer before its run is not listed


def new_run(program_name: str) -> str:
    """A folder for a run of program `program_name`, whose name is the run's id (the
    controller is made with it); `register` writes its record once the run has started."""
    return run_records.make(program_name)


def register(folder: str, controller: Any) -> None:
    """Records the run of `controller` (a launched Controller) in `folder` (`new_run`'s);
    the record goes when the program ends."""
    tls = controller.tls
    record = {
        "version": _VERSION, "run_id": controller.run_id, "program": controller.program_name,
        "launch_type": controller.launch_type, "started_at": controller.started_at,
        "launcher": {"pid": os.getpid(), "id": process_id(os.getpid())},
        "controller": {"address": controller.address, "token": controller.token},
        "tls": None if tls is None else {
            "ca": _text(tls.ca), "cert": _text(tls.cert), "key": _text(tls.key),
            "server_name": tls.server_name},
        "log_dir": controller.log_dir}
    partial = os.path.join(folder, f".{RECORD}")
    private_files.write_private(partial, json.dumps(record, indent=1).encode())
    os.replace(partial, os.path.join(folder, RECORD))  # whole, or not there
    controller.on_finish(lambda: _remove(folder))


def _remove(folder: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(folder, RECORD))
    with contextlib.suppress(OSError):
        os.rmdir(folder)


def runs(run_dir: str | None = None) -> tuple[list[run_records.Run], list[str]]:
    """The running programs of this user recorded under `run_dir` (default
    $LAUNCHPAD_RUN_DIR, else ~/.launchpad), in run-id order, and why any folder there was
    not read (another user could write it, or its record is torn). Stale records are
    removed."""
    root = run_records.root(run_dir)
    try:
        private_files.check_private_dir(root)
        names = sorted(os.listdir(root))
    except FileNotFoundError:
        return [], []
    except UnsafePathError as e:
        return [], [str(e)]
    found, refused = [], []
    for name in names:
        folder = os.path.join(root, name)
        try:
            run = read(folder)
        except UnsafePathError as e:
            refused.append(str(e))
            continue
        except (OSError, ValueError, KeyError, TypeError, EOFError,
                pickle.UnpicklingError) as e:
            refused.append(f"The record of run {name!r} could not be read ({e})")
            continue
        if run is None:
            continue
        if run.pending or answers(run):  # (a pending run has no controller yet)
            found.append(run)
        elif launcher_gone(run):
            _remove(folder)
    return found, refused


def read(folder: str) -> run_records.Run | None:
    """The run recorded in `folder`; None if it records none that may run (an ended
    detached run, the logs of a finished Slurm run).

    Raises:
      UnsafePathError: another user could write the folder or the record (nothing read).
      OSError, ValueError: the record is torn or not one.
    """
    private_files.check_private_dir(folder)
    try:
        data = private_files.read_private(os.path.join(folder, RECORD))
    except FileNotFoundError:  # a detached run's, which its launcher records
        runs = (launcher.detached_runs() for launcher in launchers.every())
        return next((run for run in (r.run_of(folder) for r in runs if r is not None)
                     if run is not None), None)
    record = json.loads(data)
    if record.get("version") != _VERSION:
        raise ValueError(f"record version {record.get('version')!r}, expected {_VERSION}")
    tls = record["tls"]
    return run_records.Run(
        run_id=record["run_id"], program=record["program"], launch_type=record["launch_type"],
        started_at=record["started_at"], controller_address=record["controller"]["address"],
        token=record["controller"]["token"],
        tls=None if tls is None else TLS(
            ca=tls["ca"].encode(), cert=tls["cert"].encode(), key=tls["key"].encode(),
            server_name=tls["server_name"]),
        folder=folder, launcher_pid=record["launcher"]["pid"],
        launcher_id=record["launcher"]["id"], log_dir=record["log_dir"])


def answers(run: run_records.Run, timeout: float = _PING_SECS) -> bool:
    """Whether the run's controller answers within `timeout` seconds."""
    client = control.ControllerClient(run.controller_address, run.token, run.tls)
    try:
        client.ping(timeout)
        return True
    except ControllerProtocolError:
        return True  # it runs; another version of launchpad launched it
    except Exception:  # noqa: BLE001 - refused, gone, unreachable or silent: not running
        return False
    finally:
        client.close()


def launcher_gone(run: run_records.Run) -> bool:
    """Whether the process that launched `run` is known to have ended: it ran on this host
    (and kernel, and pid namespace) and no process with its pid and start time lives, or
    this host has been restarted since. False for a run of another host, and for detached
    runs (their launcher may go)."""
    if not run.launcher_id:
        return False
    host, boot, namespace, _ = run.launcher_id.split(" ", 3)
    here = process_id(os.getpid()).split(" ", 3)
    if host != here[0]:
        return False
    if boot != here[1]:
        return True  # restarted since: every process of then is gone
    return namespace == here[2] and process_id(run.launcher_pid) != run.launcher_id


def process_id(pid: int) -> str:
    """`host boot-id pid-namespace start-ticks` of process `pid` (start '-' when it does not
    run): what tells it apart from another process that is given the same pid."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            started = stat.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        started = "-"
    return " ".join([socket.gethostname(), _read("/proc/sys/kernel/random/boot_id"),
                     _namespace(), started])


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return "-"


def _namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return "-"


def _text(pem: bytes) -> str:
    return pem.decode("ascii")  # PEM (courier.tls checks what it reads)
