"""Process helpers shared by the load and soak scripts."""
import socket
import time


def rss_kib(pid):
    """Resident set of `pid` in KiB (0 once it has exited)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return 0


def wait_port(port, timeout=20):
    """Waits until something accepts connections on 127.0.0.1:`port`."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listening on 127.0.0.1:{port} after {timeout}s")


def write_report(path, lines):
    """The report's lines to `path` and to stdout."""
    text = "\n".join(lines) + "\n"
    with open(path, "w") as f:
        f.write(text)
    print(text)
