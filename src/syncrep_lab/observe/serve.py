"""``observe --serve ADDR`` and ``--textfile PATH``: observe window after window and
export each window's answer for Prometheus.

- **Windows, not a sliding window.** Each window (``--seconds``, cut into ``--slice``
  slices as for ``observe``) is watched, stored and answered as one ``observe`` is; a
  scrape reads the latest *completed* window's answer. So every exported figure is one
  of an answer ``observe --json`` gives (``--json`` prints each window's, one line
  each), with its interval over that window's slices, and two scrapes of one window
  agree. The price: figures are a window old, and between two windows the answer is
  read from the store (a fraction of a second, not sampled).
- **The same rules as observe.** The same read-only sessions, kept open from window
  to window; ``--anatomy`` is attached for one window at a time and for at most an
  hour in all (``--windows`` must say how many).
- **Stored where asked.** With ``--out`` every window is kept there as a cell of one
  observe run; without it each window goes to a scratch folder, removed once the next
  one is answered and when the exporter ends.
- **Ends clean.** SIGTERM or Ctrl-C ends the window in progress (with the anatomy's
  bpftrace, killed), closes the sessions and the listening socket, and removes the
  scratch folder; after ``kill -9``, ``syncrep-lab clean`` ends a bpftrace left behind,
  as for ``observe``.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import socketserver
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

from prometheus_client import CollectorRegistry, write_to_textfile
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from syncrep_lab.errors import Interrupted, UserError
from syncrep_lab.observe.anatomy import MAX_SECONDS as ANATOMY_SECONDS
from syncrep_lab.observe.command import ObserveOptions, Observer
from syncrep_lab.observe.metrics import families, not_yet

ADDRESS_FIX = ("give HOST:PORT, e.g. :9187 (every interface), 127.0.0.1:9187, "
               "[::1]:9187, or :0 for a free port")


@dataclass(frozen=True)
class ServeOptions:
    serve: str | None  # HOST:PORT
    textfile: Path | None
    windows: int | None  # None: until stopped
    keep: bool = False  # every window kept in --out (else a scratch folder)


def parse_address(text: str) -> tuple[str, int]:
    """HOST:PORT (HOST may be empty: every interface; IPv6 in brackets).

    >>> parse_address(":0"), parse_address("127.0.0.1:9187"), parse_address("[::1]:80")
    (('', 0), ('127.0.0.1', 9187), ('::1', 80))
    """
    host, sep, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:  # an IPv6 address without brackets: the port cannot be told
        raise UserError(f"--serve {text!r} is not HOST:PORT",
                        "put an IPv6 address in brackets, e.g. [::1]:9187")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535 or " " in host:
        raise UserError(f"--serve {text!r} is not HOST:PORT", ADDRESS_FIX)
    return host, int(port)


def check(opts: ObserveOptions, serve: ServeOptions) -> None:
    """Refuse what cannot work before anything is opened."""
    if serve.serve is None and serve.textfile is None:
        raise UserError("--windows needs --serve or --textfile",
                        "add --serve HOST:PORT or --textfile PATH")
    if serve.serve is not None:
        parse_address(serve.serve)
    if serve.windows is not None and serve.windows < 1:
        raise UserError(f"--windows {serve.windows} is below one",
                        "give how many windows to answer, or leave it out: until stopped")
    if opts.anatomy and (serve.windows is None
                         or serve.windows * opts.seconds > ANATOMY_SECONDS):
        raise UserError("--anatomy with --serve/--textfile: the commit anatomy is attached "
                        f"for at most {ANATOMY_SECONDS:g} s in all (its traps weigh on "
                        "every commit of the server)",
                        f"add --windows N with N x --seconds at most {ANATOMY_SECONDS:g}")
    if serve.textfile is not None:
        folder = serve.textfile.parent
        if serve.textfile.is_dir():
            raise UserError(f"--textfile {serve.textfile} is a folder",
                            "give a file path ending in .prom inside the textfile "
                            "collector's folder")
        if not folder.is_dir():
            raise UserError(f"--textfile {serve.textfile}: the folder {folder} does not "
                            "exist", "create it, or give the folder node_exporter's "
                            "--collector.textfile.directory reads")
        try:  # access() says yes to root on a read-only mount: try it
            fd, probe = tempfile.mkstemp(dir=folder, prefix=".syncrep-lab-", suffix=".tmp")
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            raise UserError(f"--textfile {serve.textfile}: cannot write in {folder} "
                            f"({exc.strerror})", "give a folder this user may write in "
                            "(ls -ld it), or run as the user node_exporter's folder "
                            "belongs to") from None


class Answer(Collector):
    """The families of the latest answer; swapped whole, read by every scrape."""

    def __init__(self) -> None:
        self.current: list[Metric] = not_yet("no window has ended yet", 0)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        self.scrapes = 0

    def collect(self) -> list[Metric]:
        return self.current


def _handler(answer: Answer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        timeout = 10  # one scrape at a time: a client that sends nothing is dropped

        def do_GET(self) -> None:
            if self.path.split("?")[0] not in ("/metrics", "/"):
                self.send_error(404, "only /metrics is served")
                return
            if self.path.split("?")[0] == "/":
                body = b"syncrep-lab observe: the answer is at /metrics\n"
                kind = "text/plain; charset=utf-8"
            else:
                encoder, kind = choose_encoder(self.headers.get("Accept") or "")
                body = encoder(answer.registry)
                answer.scrapes += 1
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # a scrape a second is no news

    return Handler


class _Server(HTTPServer):
    # One thread serves every scrape, one after another (a scrape takes a few ms): a
    # thread per connection, as ThreadingHTTPServer makes, may be given a malloc arena of
    # its own when it overlaps the observer's work, and the arenas stay in RSS
    # (docs/decisions.md, "observe --serve on one thread").

    def server_bind(self) -> None:
        # HTTPServer's looks its own name up (getfqdn): seconds where DNS is slow, and a
        # name nothing here uses
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = str(self.server_address[0]), \
            int(self.server_address[1])


def bind(address: str) -> HTTPServer:
    """The listening server on ``address`` (UserError where it cannot listen)."""
    host, port = parse_address(address)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    cls = type("Server", (_Server,), {"address_family": family})
    try:
        return cls((host, port), BaseHTTPRequestHandler)  # type: ignore[no-any-return]
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise UserError(f"--serve {address}: the address is in use",
                            "stop what listens there (ss -ltnp 'sport = :"
                            f"{port}'), or give another port (:0 picks a free one)") from None
        if exc.errno in (errno.EACCES, errno.EPERM):
            raise UserError(f"--serve {address}: {exc.strerror}",
                            "ports below 1024 need root: give a higher one") from None
        raise UserError(f"--serve {address}: cannot listen there ({exc.strerror or exc})",
                        "give an address of this machine, e.g. :9187") from None


def shown(server: HTTPServer) -> str:
    host, port = server.server_address[:2]
    host = str(host)
    return f"http://{f'[{host}]' if ':' in host else host or '0.0.0.0'}:{port}/metrics"


def serve(opts: ObserveOptions, options: ServeOptions, say: Callable[[str], None],
          line: Callable[[str], None] | None = None) -> int:
    """Answer window after window until stopped or ``options.windows`` are done; the
    exit status (0, or 3 when the primary stopped answering). ``line``: each window's
    JSON (``--json``)."""
    check(opts, options)
    server = bind(options.serve) if options.serve is not None else None
    answer = Answer()
    thread = None
    observer = Observer(opts, say)
    scratch: Path | None = None
    try:
        if server is not None:
            server.RequestHandlerClass = _handler(answer)
            thread = threading.Thread(target=server.serve_forever, name="metrics",
                                      kwargs={"poll_interval": 0.2}, daemon=True)
            thread.start()
            say(f"serving the answer of each {opts.seconds:g} s window at {shown(server)}")
        observer.open()
        if not options.keep:
            # named by this process, so that whose it is can be told
            scratch = Path(tempfile.mkdtemp(prefix=f"syncrep-lab-serve-{os.getpid()}-"))
        n = 0
        while options.windows is None or n < options.windows:
            n += 1
            total = (options.windows or 1) * opts.seconds
            watched, notes, lags = observer.window(opts.seconds, total)
            if watched.signum is not None:
                raise Interrupted(watched.signum)  # the window in progress is dropped
            folder = scratch / f"window-{n}" if scratch is not None else opts.out
            if not watched.slices:
                answer.current = not_yet(watched.ended or "nothing gathered", n - 1)
                _textfile(options, answer)
                break
            done = observer.store(watched, notes, lags, out=folder)
            ended_at = time.time()
            from syncrep_lab.analysis.observe import run_figures

            figures = run_figures(folder, done.cell)
            answer.current = families(figures, lags, n, n, ended_at)
            _textfile(options, answer)
            if line is not None:
                line(json.dumps({**done.to_json(), "window": n,
                                 "windows": [figures.observation.to_json()]}))
            if scratch is not None and n > 1:
                shutil.rmtree(scratch / f"window-{n - 1}", ignore_errors=True)
            if watched.ended:
                return 3
        return 0
    finally:
        observer.close()
        if server is not None:
            if thread is not None:
                server.shutdown()  # waits for serve_forever: only once it runs
            server.server_close()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _textfile(options: ServeOptions, answer: Answer) -> None:
    if options.textfile is not None:
        write_to_textfile(str(options.textfile), answer.registry)  # tmp, then rename
