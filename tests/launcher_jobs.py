"""Jobs for the launcher tests, importable by a spawned process (a test module's functions are not)."""

import os
import time


def sleep_then_record(pid_file: str, seconds: float) -> int:
    time.sleep(seconds)
    with open(pid_file, "w") as f:
        f.write(f"{os.getpid()}\n")
    return os.getpid()
