"""Jobs for the launcher tests, importable by a spawned process (a test module's functions are not)."""

import os
import time


def sleep_then_record(pid_file: str, seconds: float) -> int:
    open(pid_file + ".started", "w").close()  # the job is running: the test may kill its launcher now
    time.sleep(seconds)
    with open(pid_file, "w") as f:
        f.write(f"{os.getpid()}\n")
    return os.getpid()


def sleep_record_then_fail(pid_file: str, seconds: float) -> int:
    """A job that ends by raising, as one stopped by SIGTERM does: Lightning's SIGTERMException is a
    SystemExit, which Hydra's run_job does not catch."""
    sleep_then_record(pid_file, seconds)
    raise SystemExit("stopped by SIGTERM")


def raise_unpicklable() -> None:
    """A job whose exception carries what pickle refuses (a lambda)."""
    error = ValueError("boom")
    error.hook = lambda: None
    raise error


def return_unpicklable():
    return lambda: None
