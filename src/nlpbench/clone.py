"""A clean clone of this checkout's commit in a scratch directory, and snakemake run inside it: what
`nlpbench verify` and `nlpbench end-to-end` build in, so that they see what a fresh checkout of the commit does."""

from __future__ import annotations

import contextlib
import os
import shutil
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
    """A clean clone of `repo` at `commit` in a scratch directory, deleted afterwards however the block ends (an
    error, or a stop signal under nlpbench.runtime.stop_signals.raised); yields the clone and the environment that runs the
    clone's own code (whatever nlpbench this interpreter has installed, an editable install's path included), with
    `mirror` for its data steps when one is set."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        clone = tmp / "repo"
        subprocess.run(["git", "clone", "-q", "--no-checkout", str(repo), str(clone)], check=True)
        _git(clone, "checkout", "-q", commit)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(clone / "src"), os.environ.get("PYTHONPATH", "")]),
               "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}  # `nlpbench`
        if mirror:
            env["NLPBENCH_MIRROR"] = str(Path(mirror).resolve())
        yield clone, env
    finally:
        _remove(tmp)


def _remove(directory: Path) -> None:
    """Delete a scratch directory, also when a stop signal breaks the deletion off midway: the first one raises
    (nlpbench.runtime.stop_signals) and later ones are ignored, so a second pass finishes it before the signal goes on."""
    try:
        shutil.rmtree(directory, ignore_errors=True)
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise


STOP_GRACE = 15.0    # seconds snakemake has to stop its jobs and itself after SIGTERM, before SIGKILL


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):     # none of the group is left
        os.killpg(pgid, sig)


def _stop(proc: subprocess.Popen) -> None:
    """Stop a process started in a session of its own and every job it started, which share its process group:
    SIGTERM to the group while the process runs, then, once it has ended or after STOP_GRACE seconds, SIGKILL to
    whatever of the group is left (a job that outlived it, or ignored SIGTERM); at once when a stop signal breaks
    the grace off."""
    try:
        if proc.poll() is None:
            _signal_group(proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=STOP_GRACE)
    finally:
        _signal_group(proc.pid, signal.SIGKILL)
        proc.wait()


def snakemake(clone: Path, env: dict, args: list[str], log_path: Path, timeout: float | None = None) -> int:
    """Run snakemake with `args` in a scratch clone, its output to `log_path`; its exit status. However it ends,
    no job of it is left running: after `timeout` seconds snakemake and the jobs it started are stopped and the
    status is 124; so are they when this process is interrupted (Ctrl-C, or a stop signal under
    nlpbench.runtime.stop_signals.raised) or fails, and any job left behind by a snakemake that ended is killed."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "snakemake", *args], cwd=clone, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)   # its jobs share its group
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return 124
        finally:
            _stop(proc)
