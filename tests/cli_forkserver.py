"""Run the entry points (`src/train.py`, `src/eval.py`) for the tests from a process that has already
imported torch, Lightning and Hydra, by forking it: a fresh interpreter spends ~9 s of CPU importing
them on a 2-core CI machine (torch._dynamo through Lightning, scipy.signal through torchmetrics), more
than most of the runs the tests start, and the suite starts over a hundred.

The server is the pattern of `multiprocessing`'s forkserver: it imports and computes nothing else, so
it holds one thread and no state a run could see; each request forks it, and the child runs the script
as `python script args` would (`runpy.run_path` as `__main__`, its own argv, working directory,
environment and stdout/stderr files, the exit code of `sys.exit` or of an uncaught exception, atexit
handlers at the end). What a fork cannot give, `conftest.run_cli` keeps for a real process: a request
whose environment differs from the server's in a variable read while those modules were imported
(`FIXED_AT_IMPORT`), and every run when SEQBENCH_TEST_FORK=0.

Protocol, one JSON line each way on the server's stdin/stdout: a request
{"script", "args", "cwd", "env", "stdout", "stderr"} is answered by {"pid"} when the child starts and
by {"returncode"} when it ends (negative: killed by that signal, as `subprocess` reports it).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRELOAD = ("torch", "lightning", "hydra", "seqbench.entry", "seqbench.training.run")
# environment variables read while PRELOAD is imported or at start-up (thread pools, hash seeds); the
# child applies PYTHONPATH itself, to sys.path, as start-up would
FIXED_AT_IMPORT = ("PYTHON", "OMP_", "MKL_", "KMP_", "OPENBLAS_", "TORCH", "CUDA", "LD_", "MPL")


def fixed_at_import(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(FIXED_AT_IMPORT) and k != "PYTHONPATH"}


def _python_path(env: dict[str, str]) -> list[str]:
    return [os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep)] if env.get("PYTHONPATH") else []


def _run_child(request: dict) -> None:
    """In the forked child: become `python <script> <args>` and exit with its code."""
    import atexit
    import runpy
    import traceback

    code: int = 1
    try:
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(out, fd)
            os.close(out)
        os.chdir(request["cwd"])
        own = _python_path(os.environ)
        os.environ.clear()
        os.environ.update(request["env"])
        script = request["script"]
        sys.argv = [script, *request["args"]]
        # as start-up builds it: the script's folder, then PYTHONPATH, then the standard paths
        rest = [p for p in sys.path[1:] if p not in own]
        sys.path[:] = [os.path.dirname(script), *_python_path(os.environ), *rest]
        try:
            runpy.run_path(script, run_name="__main__")
            code = 0
        except SystemExit as exc:
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:
                print(exc.code, file=sys.stderr)
        except BaseException:  # noqa: BLE001 - an uncaught error: the traceback and status 1, as python does
            traceback.print_exc()
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)


def serve() -> None:
    sys.path[0] = str(ROOT / "src")  # not tests/: a child's imports are the script's, nothing more
    for module in PRELOAD:
        __import__(module)
    # the protocol on private descriptors; the children's 0/1 are theirs
    requests = os.fdopen(os.dup(0), "r")
    replies = os.fdopen(os.dup(1), "w")
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    replies.write(json.dumps({"ready": True}) + "\n")
    replies.flush()
    for line in requests:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            requests.close()
            replies.close()
            _run_child(request)
        replies.write(json.dumps({"pid": pid}) + "\n")
        replies.flush()
        _, status = os.waitpid(pid, 0)
        replies.write(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}) + "\n")
        replies.flush()


class Client:
    """The test process's end: `run` is `subprocess.run(cmd, capture_output=True, text=True, ...)` for a
    command `[python, script, *args]`, or None where only a real process would do (`FIXED_AT_IMPORT`)."""

    def __init__(self, env: dict[str, str]):
        self.fixed = fixed_at_import(env)
        self.proc = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     cwd=ROOT, env=env)
        self.buffer = b""
        self._reply(timeout=300)  # {"ready"}: the imports are done

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)

    def run(self, cmd: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess | None:
        if fixed_at_import(env) != self.fixed:
            return None
        with tempfile.TemporaryDirectory(prefix="forked-run-") as tmp:
            out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
            request = {"script": cmd[1], "args": cmd[2:], "cwd": str(cwd), "env": env,
                       "stdout": str(out), "stderr": str(err)}
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
            pid = self._reply(timeout=60)["pid"]
            try:
                returncode = self._reply(timeout=timeout)["returncode"]
            except subprocess.TimeoutExpired:
                os.kill(pid, signal.SIGKILL)
                self._reply(timeout=60)
                raise subprocess.TimeoutExpired(cmd, timeout, output=_text(out), stderr=_text(err)) from None
            return subprocess.CompletedProcess(cmd, returncode, _text(out), _text(err))

    def _reply(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise subprocess.TimeoutExpired(self.proc.args, timeout)
            chunk = os.read(fd, 65536)
            if not chunk:
                raise RuntimeError(f"the fork server exited with status {self.proc.wait()}")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)


def _text(path: Path) -> str:
    return path.read_bytes().decode(errors="replace") if path.is_file() else ""


if __name__ == "__main__":
    serve()
