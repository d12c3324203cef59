"""spec/support/terminal.py OUT GO STATUS COMMAND... - run COMMAND on a
terminal of its own (a pseudo-terminal), as a user at a shell would, for the
specs of what a user runs by hand (`make run`).

Everything COMMAND writes to the terminal is appended to OUT as it comes.
Once the file GO exists, a Ctrl-C is typed (the terminal sends SIGINT to its
foreground process group, as a real one does). When COMMAND has exited and
the terminal is closed, its exit status (128 + N for a signal N) is written
to STATUS.
"""
import os
import pty
import select
import sys

out, go, status = sys.argv[1:4]
pid, fd = pty.fork()
if pid == 0:
    os.execvp(sys.argv[4], sys.argv[4:])
typed = False
with open(out, "ab", buffering=0) as f:
    while True:
        if not typed and os.path.exists(go):
            os.write(fd, b"\x03")
            typed = True
        ready, _, _ = select.select([fd], [], [], 0.1)
        if not ready:
            continue
        try:
            data = os.read(fd, 65536)
        except OSError:  # EIO: every process on the terminal closed it
            break
        if not data:
            break
        f.write(data)
_, st = os.waitpid(pid, 0)
code = os.waitstatus_to_exitcode(st)
with open(status, "w") as f:
    f.write("%d\n" % (code if code >= 0 else 128 - code))
