"""The runtime wing: what a running job needs, whatever its family.

    io.py            atomic file output and guarded reads
    checkpoints.py   torch files written atomically, read without running code
    rundirs.py       a run id to its folder under runs/
    run_record.py    what a finished run recorded of its files, checked before they are read
    provenance.py    code commit, device and time for the tables' headers
    job_clock.py     a training job's time over all its attempts
    progress.py      'epoch k/N, elapsed ..., remaining ~...' for the logs
    gpu_slots.py     one GPU of its own for each training job
    allocator.py     freed memory kept for reuse in training processes
    train_lock.py    one trainer per training job
    stop_signals.py  the signals that end a command, as an exception
"""
