"""The signals that end a command, as an exception (nlpbench.runtime.stop_signals): what `nlpbench verify` and
`nlpbench end-to-end` clean up on (tests/test_verify.py sends them to a real verify)."""

import os
import signal
import time

import pytest

from nlpbench.runtime import stop_signals


@pytest.fixture
def as_in_a_terminal():
    """The stop signals at their defaults, as a command started from a terminal has them (a pytest-xdist worker
    starts with SIGINT ignored, which stop_signals rightly leaves ignored)."""
    stops = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    saved = {sig: signal.getsignal(sig) for sig in stops}
    for sig in stops:
        signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


@pytest.mark.parametrize("sig, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_the_first_stop_signal_raises_and_later_ones_do_not_break_the_cleanup_off(sig, status, as_in_a_terminal):
    before = signal.getsignal(sig)
    cleaned = []
    with pytest.raises(stop_signals.Stopped) as stopped:
        with stop_signals.raised():
            try:
                os.kill(os.getpid(), sig)
                time.sleep(30)                             # broken off by the signal's Stopped
                pytest.fail(f"{sig.name} did not stop the block")
            finally:
                os.kill(os.getpid(), signal.SIGTERM)       # a second one while cleaning up: ignored
                os.kill(os.getpid(), signal.SIGINT)
                cleaned.append(True)
    assert (str(stopped.value), stopped.value.exit_status, cleaned) == (sig.name, status, [True])
    assert signal.getsignal(sig) == before                   # the command's own handlers are back


def test_a_signal_ignored_from_the_start_stays_ignored():
    """Under `nohup` SIGHUP is ignored: a stop signal only where the command would have ended by it."""
    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with stop_signals.raised():
            os.kill(os.getpid(), signal.SIGHUP)
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, before)
