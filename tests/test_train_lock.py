"""One trainer per training job (nlpbench.runtime.train_lock): a second `nlpbench train` of a group being trained stops at
once with one line naming the holder, and the lock never outlives its process."""

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from nlpbench import cli, config, plan, registry
from nlpbench.runtime import job_clock, train_lock

REPO = Path(__file__).resolve().parents[1]

# a process of its own that takes the job's lock, says so, and holds it until it is killed
HOLDER = ("import sys, time\nfrom nlpbench.runtime import train_lock\n"
          "with train_lock.held(sys.argv[1], sys.argv[2]):\n"
          "    print('held', flush=True)\n"
          "    time.sleep(600)\n")

# a process of its own that tries to take the job's lock and prints what it got
TRY = ("import sys\nfrom nlpbench.runtime import train_lock\n"
       "try:\n"
       "    with train_lock.held(sys.argv[1], sys.argv[2]):\n"
       "        print('took it')\n"
       "except train_lock.GroupBeingTrained as e:\n"
       "    print(e)\n")


def _python(code: str, *args: str, **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code, *map(str, args)], text=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}, **popen)


@pytest.fixture(scope="module")
def smoke_plan() -> plan.Plan:
    return plan.make(config.load(REPO / "params.yaml", {"scale": "smoke"}))


@pytest.fixture(scope="module")
def group(smoke_plan) -> str:
    return next(iter(smoke_plan.groups))


@pytest.fixture
def family(smoke_plan, group):
    return registry.get(smoke_plan.owner[group])


def _train(tmp_path: Path, group: str, *extra: str) -> int:
    return cli.main(["--params", str(REPO / "params.yaml"), "--set", "scale=smoke", "--runs", str(tmp_path / "runs"),
                     "train", group, "--logs", str(tmp_path / "logs"), *extra])


def test_a_second_trainer_of_a_group_stops_at_once_naming_the_holder_until_the_holder_is_killed(
        tmp_path, group, family, monkeypatch, capsys):
    trained = []
    monkeypatch.setattr(family, "train", lambda g, *_: trained.append(g))
    monkeypatch.setattr(family, "retrain", lambda g, *_: trained.append(g), raising=False)
    logs = tmp_path / "logs"
    clock = job_clock.clock_path(logs, group)
    clock.parent.mkdir()
    clock.write_text(json.dumps({"seconds": 240.0, "finished": False}))        # the holder's attempt so far
    holder = _python(HOLDER, logs, group, stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline() == "held\n"
        for again in ((), ("--again",)):
            assert _train(tmp_path, group, *again) == 2
            assert capsys.readouterr().err == (
                f"nlpbench: training group {group} is being trained by pid {holder.pid} on {socket.gethostname()} "
                f"(it holds {train_lock.lock_path(logs, group)}); wait for it to end, or stop it\n")
        assert trained == []                                                    # nothing trained ...
        assert json.loads(clock.read_text()) == {"seconds": 240.0, "finished": False}   # ... nor timed
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert _train(tmp_path, group) == 0                       # the kernel released the killed holder's lock
    assert trained == [group] and job_clock.recorded(clock).finished
    assert train_lock.lock_path(logs, group).read_text() == ""   # held by no one


def test_nlpbench_train_holds_its_group_s_lock_while_it_trains(tmp_path, group, family, monkeypatch):
    """The lock is taken where every family's training starts (cli.cmd_train): while the family trains, another
    process cannot take it, and once it is done it can."""
    logs = tmp_path / "logs"
    seen = []

    def train(g, *_):
        seen.append(_python(TRY, logs, g, stdout=subprocess.PIPE).communicate()[0])
    monkeypatch.setattr(family, "train", train)
    assert _train(tmp_path, group) == 0
    assert seen == [f"training group {group} is being trained by pid {os.getpid()} on {socket.gethostname()} "
                    f"(it holds {train_lock.lock_path(logs, group)}); wait for it to end, or stop it\n"]
    assert _python(TRY, logs, group, stdout=subprocess.PIPE).communicate()[0] == "took it\n"


def test_a_file_system_without_locks_trains_with_a_warning(tmp_path, group, family, monkeypatch, capsys):
    import errno
    import fcntl

    def no_locks(fd, operation):
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))
    monkeypatch.setattr(fcntl, "flock", no_locks)
    trained = []
    monkeypatch.setattr(family, "train", lambda g, *_: trained.append(g))
    assert _train(tmp_path, group) == 0 and trained == [group]
    assert capsys.readouterr().err == (
        f"nlpbench: warning: cannot lock {train_lock.lock_path(tmp_path / 'logs', group)} "
        f"({os.strerror(errno.ENOLCK)}); training {group} without the check that no other process trains it\n")
