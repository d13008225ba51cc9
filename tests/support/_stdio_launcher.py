"""``python -I -S _stdio_launcher.py SOCKET ARGS``: run ``python ARGS`` forked by the test
process's `tests.support.forked_stdio` relay, on this process's stdin, stdout and stderr.

Standard library only, and no site: it starts in a few milliseconds. It hands its three
descriptors over, keeps none of stdin and stdout (so their ends are the server's alone),
forwards SIGTERM and SIGINT to the server, and exits as the server did (the relay kills the
server if this process is killed).
"""

import json
import os
import signal
import socket
import sys


def main() -> None:
    relay = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    relay.connect(sys.argv[1])
    request = {"argv": sys.argv[2:], "env": dict(os.environ), "cwd": os.getcwd()}
    socket.send_fds(relay, [json.dumps(request).encode()], [0, 1, 2])
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    pid = int(json.loads(relay.recv(4096))["pid"])
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda number, _frame: os.kill(pid, number))
    said = relay.recv(4096)
    code = int(json.loads(said)["code"]) if said else 1
    if code < 0:  # ended by a signal: so does this process
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code & 0xFF)


main()
