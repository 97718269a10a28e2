"""Opens N keep-alive connections to HOST:PORT, makes one request on each, and holds
them idle until stdin closes. Prints "ready" once all are open and idle.

Usage: python3 hold.py HOST PORT N PATH
"""
import resource
import selectors
import socket
import sys


def main() -> int:
    host, port, count, path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, count + 100)), hard))
    request = f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
    sockets = []
    for _ in range(count):
        s = socket.create_connection((host, port))
        s.sendall(request)
        sockets.append(s)
    # Read each response head and body (small file) so every connection is idle again.
    selector = selectors.DefaultSelector()
    pending = {}
    for s in sockets:
        s.setblocking(False)
        selector.register(s, selectors.EVENT_READ)
        pending[s] = b""
    done = 0
    while done < count:
        for key, _ in selector.select(timeout=30):
            s = key.fileobj
            chunk = s.recv(65536)
            if not chunk:
                raise SystemExit(f"a connection closed early after {done} responses")
            pending[s] += chunk
            head, sep, body = pending[s].partition(b"\r\n\r\n")
            if sep:
                length = int([l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")][0])
                if len(body) >= length:
                    selector.unregister(s)
                    done += 1
    print("ready", flush=True)
    sys.stdin.read()
    return 0


if __name__ == "__main__":
    sys.exit(main())
