"""profiles/slurm against a real SLURM: a one-node cluster on localhost (munged, slurmctld, slurmd of Debian's
slurm-wlm and munge, installed when absent and this user may), one table's smoke DAG submitted through the profile.

    python -m pytest -m slurm tests/test_slurm.py

Skips, saying why, where the executor plugin is missing (pip install -e '.[cluster]'), where SLURM is absent and
cannot be installed (root and apt-get), or where the daemons cannot be started (slurmd needs root)."""

import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nlpbench import config, plan, resources, status

REPO = Path(__file__).resolve().parents[1]
SYSTEM_CONF = Path("/etc/slurm/slurm.conf")
DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol")
TABLE = "table_tolias_thesis_16"      # the cheapest table at the smoke scale: two small training jobs, no download


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _sbin(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")


def _install_or_reason() -> str | None:
    """None when SLURM and munge are here (installed now if absent and possible), else why not."""
    if importlib.util.find_spec("snakemake_executor_plugin_slurm") is None:
        return "the SLURM executor plugin is not installed (pip install -e '.[cluster]')"
    if os.geteuid() != 0:
        return "starting slurmd and munged for a one-node cluster needs root"
    if all(_sbin(d) for d in DAEMONS):
        return None
    if not shutil.which("apt-get"):
        return "slurm-wlm and munge are not installed and there is no apt-get to install them"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", "slurm-wlm", "munge"]
    done = subprocess.run(install, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        subprocess.run(["apt-get", "update"], env=env, capture_output=True)
        done = subprocess.run(install, env=env, capture_output=True, text=True)
    if done.returncode != 0 or not all(_sbin(d) for d in DAEMONS):
        return f"apt-get could not install slurm-wlm and munge: {done.stderr.strip()[-300:]}"
    return None


SLURM_CONF = """\
ClusterName=nlpbench
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={dir}/munge.sock
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
MinJobAge=600
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory} State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


def _memory_mb() -> int:
    with open("/proc/meminfo") as f:
        total_kb = int(next(line for line in f if line.startswith("MemTotal")).split()[1])
    return total_kb // 1024 - 512


def _stop(pid_file: Path) -> None:
    try:
        pid = int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)


@pytest.fixture(scope="module")
def slurm_cluster(tmp_path_factory):
    """The environment (SLURM_CONF) of a running one-node cluster; its daemons stop afterwards."""
    reason = _install_or_reason()
    if reason:
        pytest.skip(reason)
    d = tmp_path_factory.mktemp("slurm")
    d.chmod(0o700)
    for sub in ("state", "spool"):
        (d / sub).mkdir()
    key = d / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    host = socket.gethostname().split(".")[0]
    # the default place: Snakemake's job step runs srun without the SLURM_* variables, SLURM_CONF included
    conf = SYSTEM_CONF
    if conf.exists():
        pytest.skip(f"{conf} exists: this machine has a SLURM configuration of its own, left as it is")
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text(SLURM_CONF.format(host=host, dir=d, ctld_port=_free_port(), slurmd_port=_free_port(),
                                      cpus=os.cpu_count() or 1, memory=_memory_mb()))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    started = []
    try:
        for name, args in (("munged", ["--force", f"--key-file={key}", f"--socket={d}/munge.sock",
                                      f"--pid-file={d}/munged.pid", f"--log-file={d}/munged.log",
                                      f"--seed-file={d}/munged.seed"]),
                           ("slurmctld", ["-f", str(conf)]), ("slurmd", ["-f", str(conf)])):
            done = subprocess.run([_sbin(name), *args], env=env, capture_output=True, text=True, timeout=60)
            if done.returncode != 0:
                pytest.skip(f"{name} did not start: {done.stderr.strip()[-300:]}")
            started.append(d / f"{name}.pid")
        for _ in range(60):
            state = subprocess.run(["sinfo", "-h", "-o", "%t"], env=env, capture_output=True, text=True).stdout
            if state.strip() in ("idle", "mix", "alloc"):
                break
            time.sleep(1)
        else:
            logs = "".join((d / f).read_text()[-1000:] for f in ("slurmctld.log", "slurmd.log") if (d / f).exists())
            pytest.skip(f"the one-node cluster did not come up (sinfo: {state.strip()!r}): {logs}")
        yield env
    finally:
        subprocess.run(["scancel", "--user", "root"], env=env, capture_output=True)
        for pid_file in reversed(started):
            _stop(pid_file)
        conf.unlink(missing_ok=True)


def _jobs(env: dict) -> list[dict[str, str]]:
    """Every job the controller knows (it keeps finished ones for MinJobAge), as scontrol's key=value pairs."""
    out = subprocess.run(["scontrol", "-o", "show", "job"], env=env, capture_output=True, text=True).stdout
    return [dict(re.findall(r"(\w+)=(\S*)", line)) for line in out.splitlines() if line.startswith("JobId=")]


def _minutes(limit: str) -> int:
    """scontrol's TimeLimit ([days-]hours:minutes:seconds) in minutes."""
    days, _, hms = limit.rpartition("-")
    h, m, s = (int(x) for x in hms.split(":"))
    return int(days or 0) * 1440 + h * 60 + m + (1 if s else 0)


@pytest.mark.slurm
def test_a_smoke_table_is_built_through_the_slurm_profile(slurm_cluster, tmp_path):
    """Table 16 at the smoke scale through profiles/slurm: each training job goes through sbatch with --time and
    --mem (scontrol shows its rule's runtime and mem_mb) and trains, and the table, a local rule, is written on the
    submitting host without a job of its own."""
    for item in ("Snakefile", "params.yaml", "overrides.yaml", "pipeline", "envs", "results", "profiles"):
        (shutil.copytree if (REPO / item).is_dir() else shutil.copy)(REPO / item, tmp_path / item)
    env = {**slurm_cluster, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    before = {j["JobId"] for j in _jobs(env)}
    # this cluster keeps no accounting (sacct), so job states come from squeue
    cmd = [sys.executable, "-m", "snakemake", "--profile", "profiles/slurm", TABLE, "--config", "scale=smoke",
           "--slurm-status-command", "squeue", "--verbose"]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-4000:]

    calls = [line for line in done.stderr.splitlines() if "sbatch call:" in line]
    assert len(calls) == 2, calls                              # the two training groups; the table is local
    assert all(re.search(r" -t \d+ ", c) and re.search(r" --mem \d+ ", c) for c in calls), calls
    jobs = [j for j in _jobs(env) if j["JobId"] not in before]
    assert len(jobs) == 2 and {j["JobState"] for j in jobs} == {"COMPLETED"}, jobs
    costs = status.read_costs(REPO / "results" / "costs.tsv")
    p = plan.make(config.load(REPO / "params.yaml", {"scale": "smoke"}))
    groups = {plan.rule_name("train", g): g for g in p.groups}
    for job in jobs:
        rule = re.match(r"rule_(\w+?)(_wildcards.*)?$", job["Comment"]).group(1)
        assert rule in groups, rule
        expected = resources.train(groups[rule], p.owner[groups[rule]], "smoke", costs)
        assert _minutes(job["TimeLimit"]) == expected["runtime"], (rule, job["TimeLimit"])
        assert job["MinMemoryNode"] == f"{expected['mem_mb']}M", (rule, job["MinMemoryNode"])
        assert job["NumCPUs"] == "1", (rule, job["NumCPUs"])
    md = (tmp_path / "results" / "smoke" / "tolias-thesis" / "16.md").read_text()
    assert "**scale**: smoke" in md
    assert (tmp_path / "runs" / "_tables" / "smoke" / "tolias-thesis" / "16.done").exists()
