"""The service's Flask request class: a streamed (chunked) body is held to ``MAX_CONTENT_LENGTH``
exactly, and one byte more is a 413.

For a body without ``Content-Length`` (``Transfer-Encoding: chunked``; gunicorn sets
``wsgi.input_terminated``), Werkzeug reads at most ``MAX_CONTENT_LENGTH`` bytes and then stops
without a word: a longer JSON body arrives truncated and would be answered 400 "not valid JSON".
:class:`ServiceRequest` reads it through :class:`CappedBody`, which raises
``RequestEntityTooLarge`` (413 ``payload_too_large`` from the app's error handler) on the byte past
the limit. ``create_app`` sets it as the app's ``request_class``.
"""

from __future__ import annotations

import io
from typing import IO, cast

from flask import Request
from werkzeug.exceptions import ClientDisconnected, RequestEntityTooLarge
from werkzeug.utils import cached_property


class CappedBody(io.RawIOBase):
    """A streamed request body read to its end, or ``RequestEntityTooLarge`` past ``limit`` bytes."""

    def __init__(self, stream: IO[bytes], limit: int) -> None:
        self._stream = stream
        self._limit = limit
        self._read = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        try:
            data = self._stream.read(min(len(buffer), self._limit + 1 - self._read))
        except (OSError, ValueError) as exc:  # gunicorn's NoMoreData, InvalidChunkSize: the body is cut or broken
            raise ClientDisconnected() from exc
        self._read += len(data)
        if self._read > self._limit:
            raise RequestEntityTooLarge()
        buffer[: len(data)] = data
        return len(data)


class ServiceRequest(Request):
    """Flask's request, with a streamed body capped exactly at ``max_content_length``."""

    @cached_property
    def stream(self) -> IO[bytes]:
        limit = self.max_content_length
        streamed = self.content_length is None and "wsgi.input_terminated" in self.environ
        if self.shallow or limit is None or not streamed:
            return super().stream  # type: ignore[no-any-return]
        return cast(IO[bytes], io.BufferedReader(CappedBody(self.environ["wsgi.input"], limit)))
