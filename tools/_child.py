"""Worker children of the developer tools, and the report helpers the tools share.

Each tool runs its items (OpInfo and ModuleInfo cases, ATen ops, models, fuzz programs) in child
processes started as `python tools/<tool>.py <worker command>`, so that a crash or a hang costs the
item in progress and never the run. Both sides speak JSON lines: the parent writes a job on the
child's stdin (one document, or one item per line to a child that stays up), the child writes one
message per line on its own stdout (protocol()), and the parent reads them with a timeout
(Child). What a lost child means (which item is blamed, where the next child resumes) is each
tool's own rule and stays in the tool. This module imports no torch, so a parent stays light.
"""
import json
import os
import queue
import subprocess
import sys
import threading
import time

TOOLS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TOOLS)


class Late(Exception):
    """No message came from the child in the time given; it may still be running."""


def child_env(**extra):
    """The environment of a worker child: this process's, fallback warnings silenced, plus `extra`."""
    return dict(os.environ, TORCH_PJRT_QUIET_FALLBACK="1", **extra)


class Child:
    """A running worker child, `python tools/<tool> *args`, with its stdin and stdout piped.

    `job` is written to its stdin as one JSON document and stdin is closed; without a job, stdin
    stays open for send(). `env` is the child's whole environment (default: child_env());
    `stderr` where its stderr goes (default: nowhere). The caller kills or waits for the child."""

    def __init__(self, tool, *args, job=None, env=None, stderr=subprocess.DEVNULL):
        self.proc = subprocess.Popen([sys.executable, os.path.join(TOOLS, tool), *args],
                                     env=child_env() if env is None else env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr)
        self.pid = self.proc.pid
        self.timed_out, self.code, self._ended = False, None, False
        if job is not None:
            self.proc.stdin.write(json.dumps(job))
            self.proc.stdin.close()
        self._lines = queue.Queue()
        threading.Thread(target=self._read_lines, daemon=True).start()

    def _read_lines(self):
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def send(self, item):
        """Writes `item` as one JSON line on the child's stdin; a child that died is found by the
        next read, not here."""
        try:
            self.proc.stdin.write(json.dumps(item) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass

    def read(self, timeout, gone=None):
        """The child's next message, a dict ({} for a line that is not JSON), or None once the
        child has closed its stdout (it exited). Raises Late when none comes within `timeout`
        seconds, or as soon as `gone()`, asked twice a second, says the child is lost although
        its pipe stays open."""
        if self._ended:
            return None
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Late
            try:
                line = self._lines.get(timeout=min(left, 0.5) if gone else left)
            except queue.Empty:
                if gone is not None and gone():
                    raise Late from None
                continue
            if line is None:
                self._ended = True
                return None
            return json.loads(line) if line.startswith("{") else {}

    def messages(self, timeout, first=None):
        """Yields the child's messages until it exits (`code` then holds its exit status) or until
        none comes in time, when it is killed and `timed_out` set. The first message may take
        `first` seconds (default: `timeout`), each later one `timeout`; a callable `timeout` is
        asked for the seconds before each read."""
        wait = timeout if first is None else first
        while True:
            try:
                msg = self.read(wait() if callable(wait) else wait)
            except Late:
                self.kill()
                self.timed_out = True
                return
            if msg is None:
                self.code = self.proc.wait()
                return
            wait = timeout
            yield msg

    def lost(self, timeout):
        """Why the child stopped short: "timeout (> T s)" when messages() killed it for being late,
        else "crash (signal N)" or "crash (exit N)"."""
        if self.timed_out:
            return f"timeout (> {timeout:g} s)"
        code = self.proc.wait() if self.code is None else self.code
        return f"crash (signal {-code})" if code < 0 else f"crash (exit {code})"

    def main_thread_dead(self):
        """Whether the child's main thread has exited (on SIGSEGV, say) while another thread keeps
        the process, and so its pipe, alive: a crash, not a hang."""
        try:
            with open(f"/proc/{self.pid}/stat") as fh:
                return fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
        except OSError:
            return False

    def running(self):
        return self.proc.poll() is None

    def wait(self, timeout=None):
        return self.proc.wait(timeout)

    def kill(self):
        """Kills the child if it still runs, and reaps it."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def finish(self, timeout):
        """Closes the child's stdin, which ends a child that reads items until there are no more,
        gives it `timeout` seconds to exit, then kills it."""
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout)
        except Exception:
            pass
        self.kill()


def in_parallel(drive, items, jobs):
    """Calls drive(share) for each of the `jobs` interleaved shares of `items` (items[i::jobs]),
    each in a thread of its own, and returns when all have returned."""
    threads = [threading.Thread(target=drive, args=(items[i::jobs],)) for i in range(jobs) if items[i::jobs]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def protocol():
    """In a worker child: emit(**message), which writes one JSON line on the process's stdout.
    From here on file descriptor 1 is the child's stderr, so that stray prints (Python's or C's)
    cannot corrupt the protocol."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)

    def emit(**message):
        proto.write(json.dumps(message) + "\n")
    return emit


def reason_of(exc, limit=300, details=()):
    """`Type: first line` of an exception (its message's first non-blank line, stripped), then
    "; line" for each later line that starts with one of `details`; at most `limit` characters."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    text = lines[0] if lines else ""
    text += "".join(f"; {ln}" for ln in lines[1:] if ln.startswith(details))
    return f"{type(exc).__name__}: {text}"[:limit]


def md(text):
    """`text` as one markdown table cell: pipes escaped, newlines made spaces."""
    return str(text).replace("|", "\\|").replace("\n", " ")
