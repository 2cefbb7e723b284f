"""gunicorn's gthread worker with a deadline on a request's headers as a whole, as nginx's client_header_timeout."""

import socket
import threading
import time
from typing import Any

from django.conf import settings
from gunicorn.workers.gthread import ThreadWorker  # type: ignore[import-untyped]

WATCH_EVERY_S = 0.5


class HeaderDeadlineWorker(ThreadWorker):
    """A socket timeout bounds each wait, which a header line every few seconds resets (slowloris)."""

    def init_process(self) -> None:
        self.header_deadlines: dict[Any, float] = {}  # connection → when its headers must all be in
        threading.Thread(target=self._watch, name="header-deadlines", daemon=True).start()
        super().init_process()

    def handle(self, conn: Any) -> Any:
        self.header_deadlines[conn] = time.monotonic() + settings.E31_WEB_CLIENT_TIMEOUT_S
        try:
            return super().handle(conn)
        finally:
            self.header_deadlines.pop(conn, None)

    def handle_request(self, req: Any, conn: Any) -> Any:
        self.header_deadlines.pop(conn, None)  # the headers are in: the body and the answer may be slow
        return super().handle_request(req, conn)

    def _watch(self) -> None:
        while True:
            time.sleep(WATCH_EVERY_S)
            now = time.monotonic()
            for conn, deadline in list(self.header_deadlines.items()):
                if now >= deadline and self.header_deadlines.pop(conn, None) is not None:
                    try:  # wakes the thread blocked reading it: the parser sees the end of the stream
                        conn.sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass  # already closed
