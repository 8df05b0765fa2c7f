"""The lock that lets a GPU timing test run alone among pytest-xdist workers (:mod:`timing_lock`), on the CPU: two
opens of one lock file stand for two workers."""

import fcntl
import os

import pytest
from timing_lock import held


def _granted(path, exclusive: bool) -> bool:
    """Whether another worker would get the lock now (a non-blocking try, released at once)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


@pytest.mark.parametrize("exclusive, shared_granted, exclusive_granted", [
    (False, True, False),      # tests run side by side; a timing test waits for them
    (True, False, False),      # a timing test runs alone
])
def test_a_timing_test_excludes_every_other_test_and_waits_for_them(tmp_path, exclusive, shared_granted,
                                                                    exclusive_granted):
    path = tmp_path / "lock"
    with held(path, exclusive):
        assert _granted(path, exclusive=False) is shared_granted
        assert _granted(path, exclusive=True) is exclusive_granted
    assert _granted(path, exclusive=True)          # released on leaving
