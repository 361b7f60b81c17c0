"""A clean clone of this checkout's commit in a scratch directory, and snakemake run inside it: what
`nlpbench verify` and `nlpbench end-to-end` build in, so that they see what a fresh checkout of the commit does."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def head(repo: Path, what: str, log=print) -> tuple[str, bool]:
    """The commit a clone of `repo` checks out (its HEAD) and whether the checkout has uncommitted changes, which
    the clone leaves out (said in the log)."""
    commit = _git(repo, "rev-parse", "HEAD")
    uncommitted = bool(_git(repo, "status", "--porcelain", "--untracked-files=no"))
    if uncommitted:
        log(f"{what}: the checkout has uncommitted changes; the clone has {commit[:7]} without them")
    return commit, uncommitted


@contextlib.contextmanager
def scratch_clone(repo: Path, commit: str, mirror: str | None, prefix: str = "nlpbench-end-to-end-"):
    """A clean clone of `repo` at `commit` in a scratch directory, deleted afterwards; yields the clone and the
    environment that runs the clone's own code (whatever nlpbench this interpreter has installed, an editable
    install's path included), with `mirror` for its data steps when one is set."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        clone = Path(tmp) / "repo"
        subprocess.run(["git", "clone", "-q", "--no-checkout", str(repo), str(clone)], check=True)
        _git(clone, "checkout", "-q", commit)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(clone / "src"), os.environ.get("PYTHONPATH", "")]),
               "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}  # `nlpbench`
        if mirror:
            env["NLPBENCH_MIRROR"] = str(Path(mirror).resolve())
        yield clone, env


def _stop(proc: subprocess.Popen) -> None:
    """Stop a process started in a session of its own, and every job it started (SIGTERM, then SIGKILL)."""
    for sig, grace in ((signal.SIGTERM, 15), (signal.SIGKILL, None)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace)
            return


def snakemake(clone: Path, env: dict, args: list[str], log_path: Path, timeout: float | None = None) -> int:
    """Run snakemake with `args` in a scratch clone, its output to `log_path`; its exit status. After `timeout`
    seconds snakemake and the jobs it started are stopped and the status is 124; so are they when this process
    is interrupted (Ctrl-C)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "snakemake", *args], cwd=clone, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)   # its jobs share its group
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _stop(proc)
            return 124
        except BaseException:
            _stop(proc)
            raise
