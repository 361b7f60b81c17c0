"""One GPU of its own for each training job on a machine with several.

Snakemake counts GPUs (`--resources gpu=N` runs at most N GPU jobs at once) but does not say which device a job
gets. A training rule runs its command through `python -m nlpbench.runtime.gpu_slots K -- COMMAND...` (a small process
that imports no torch and stays beside the command): it claims K of the
devices this machine shows (CUDA_VISIBLE_DEVICES where set, else `nvidia-smi -L`), each by an exclusive lock on a
file, and runs COMMAND with CUDA_VISIBLE_DEVICES naming only those. The locks live as long as the command: a job
that ends or dies frees its devices, and two pipelines on one machine never share one. When every device is taken
the job waits for one to free. Inside a SLURM job the devices are the job's own (SLURM sets CUDA_VISIBLE_DEVICES),
and the locks are kept per SLURM job.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

POLL_SECONDS = 1.0


class SlotError(ValueError):
    """A request this machine cannot meet (shown as `nlpbench: <message>`)."""


def visible_devices(env: dict[str, str] | None = None) -> list[str]:
    """The devices a job may claim: CUDA_VISIBLE_DEVICES's list where it is set (an empty value: none), else one
    per GPU `nvidia-smi -L` lists, else none (then the command runs as it would without this module)."""
    env = os.environ if env is None else env
    listed = env.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [d.strip() for d in listed.split(",") if d.strip()]
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, line in enumerate(ln for ln in out.splitlines() if ln.startswith("GPU "))]


def lock_dir(env: dict[str, str] | None = None) -> Path:
    """Where the devices' locks are: one folder per user of this machine (per SLURM job inside one)."""
    env = os.environ if env is None else env
    job = env.get("SLURM_JOB_ID")
    name = f"nlpbench-gpus-{os.getuid()}" + (f"-slurm-{job}" if job else "")
    return Path(env.get("NLPBENCH_GPU_LOCKS") or Path(tempfile.gettempdir()) / name)


def _try_lock(path: Path) -> int | None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def claim(count: int, devices: list[str], locks: Path) -> tuple[list[str], list[int]]:
    """`count` devices of `devices` that no other job holds, and the open descriptors whose locks hold them (close
    them to free the devices); waits while fewer are free."""
    if count > len(devices):
        raise SlotError(f"{count} GPUs requested, this machine shows {len(devices)} "
                         f"({','.join(devices) or 'none'}): lower --resources gpu or the rule's request")
    locks.mkdir(parents=True, exist_ok=True)
    said = False
    while True:
        got: list[tuple[str, int]] = []
        for device in devices:
            fd = _try_lock(locks / f"{device.replace('/', '_')}.lock")
            if fd is not None:
                got.append((device, fd))
                if len(got) == count:
                    return [d for d, _ in got], [fd for _, fd in got]
        for _, fd in got:
            os.close(fd)
        if not said:
            print(f"nlpbench.runtime.gpu_slots: waiting for {count} free GPU(s) of {','.join(devices)}", file=sys.stderr)
            said = True
        time.sleep(POLL_SECONDS)


def run(count: int, command: list[str]) -> int:
    """Run `command` on `count` devices of its own (none claimed when count is 0 or the machine shows none);
    returns its exit status."""
    if not command:
        raise SlotError("no command given")
    devices = visible_devices()
    if count <= 0 or not devices:
        return subprocess.run(command).returncode
    chosen, fds = claim(count, devices, lock_dir())
    try:
        return subprocess.run(command, env={**os.environ, "CUDA_VISIBLE_DEVICES": ",".join(chosen)}).returncode
    finally:
        for fd in fds:
            os.close(fd)


def main(argv: list[str] | None = None) -> int:
    """python -m nlpbench.runtime.gpu_slots K -- COMMAND ARG...: COMMAND's exit status, or 2 with the reason."""
    argv = sys.argv[1:] if argv is None else argv
    usage = "usage: python -m nlpbench.runtime.gpu_slots K -- COMMAND ARG... (K: the GPUs COMMAND needs, 0 for none)"
    try:
        if len(argv) < 2 or argv[1] != "--" or not argv[0].isdigit():
            raise SlotError(usage)
        return run(int(argv[0]), argv[2:])
    except SlotError as e:
        print(f"nlpbench.runtime.gpu_slots: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
