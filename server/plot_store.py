"""The MCP ``plot`` tool's images, kept in server memory and read back as the resource ``grpo-debug://plot/{id}``.

The tool answers with sparklines and a ``resource_link`` to the PNG (issue 26: 110-180k characters of base64 in
every answer were too much for a text-only client, and the PNG was also written under the temporary folder, outside
the allowed roots). The PNG is never written to disk by the server: :class:`PlotStore` holds it in memory.

Bounds (per server process; the link's description states them): at most ``MAX_IMAGES`` images and
``MAX_BYTES`` bytes in all, least recently used dropped first, each dropped ``TTL_S`` seconds after it was made.
An id is 128 random bits (``secrets.token_urlsafe(16)``): readable by whoever holds the link (the client that
called ``plot``; over stateless HTTP every request is its own session, so the link is not tied to a session),
not guessable by another client of the same server. A read of an id that expired or was dropped fails with
``ResourceNotFoundError`` saying to call ``plot`` again.
"""
from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict

TEMPLATE = "grpo-debug://plot/{id}"
PREFIX = "grpo-debug://plot/"
MAX_IMAGES = 16
MAX_BYTES = 32 << 20
TTL_S = 30 * 60.0


class PlotStore:
    """PNG bytes by id: bounded LRU with expiry (module docstring). Thread-safe; ``clock`` for tests."""

    def __init__(self, max_images: int = MAX_IMAGES, max_bytes: int = MAX_BYTES, ttl_s: float = TTL_S,
                 clock=time.monotonic):
        self.max_images, self.max_bytes, self.ttl_s, self.clock = max_images, max_bytes, ttl_s, clock
        self._items: OrderedDict[str, tuple[bytes, float]] = OrderedDict()  # id -> (png, made at)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            self._expire()
            return len(self._items)

    @property
    def nbytes(self) -> int:
        """The bytes held now (the images' own sizes)."""
        with self._lock:
            return sum(len(p) for p, _ in self._items.values())

    def _expire(self) -> None:
        now = self.clock()
        for key in [k for k, (_, t) in self._items.items() if now - t >= self.ttl_s]:
            del self._items[key]

    def put(self, png: bytes) -> str:
        """Keep ``png``; returns its id. The least recently used images are dropped until the bounds hold (an
        image larger than ``max_bytes`` alone is refused: ValueError)."""
        if len(png) > self.max_bytes:
            raise ValueError(f"a {len(png):,}-byte image exceeds the plot store's {self.max_bytes:,} bytes")
        key = secrets.token_urlsafe(16)
        with self._lock:
            self._expire()
            self._items[key] = (bytes(png), self.clock())
            total = sum(len(p) for p, _ in self._items.values())
            while len(self._items) > self.max_images or total > self.max_bytes:
                _, (old, _) = self._items.popitem(last=False)
                total -= len(old)
        return key

    def get(self, key: str) -> bytes | None:
        """The image of ``key`` (now the most recently used), or None when unknown, expired or dropped."""
        with self._lock:
            self._expire()
            item = self._items.get(key)
            if item is None:
                return None
            self._items.move_to_end(key)
            return item[0]

    def describe(self) -> str:
        """The bounds, as the resource link says them."""
        return (f"kept in this server's memory for {self.ttl_s / 60:g} min (at most {self.max_images} images, "
                f"{self.max_bytes >> 20} MB; least recently used dropped first)")


def link(store: PlotStore, key: str, size: int, what: str):
    """The ``resource_link`` content block of image ``key`` (``what``: e.g. '4 panels, 2 runs')."""
    from mcp.types import ResourceLink

    return ResourceLink(type="resource_link", uri=PREFIX + key, name=f"plot-{key[:8]}.png", title="Run metrics PNG",
                        mime_type="image/png", size=size,
                        description=f"PNG ({what}), {store.describe()}: read it with resources/read; call plot "
                                    "with inline=true for the image in the answer")


def register_plot_resource(server, store: PlotStore) -> None:
    """Register the ``grpo-debug://plot/{id}`` template on an MCPServer: ``resources/read`` answers the PNG
    (a blob, image/png); an unknown or expired id raises ResourceNotFoundError."""
    from mcp.server.mcpserver.exceptions import ResourceNotFoundError

    @server.resource(TEMPLATE, name="plot", title="A plot's PNG", mime_type="image/png",
                     description=f"A PNG the plot tool made, {store.describe()}.")
    def plot_resource(id: str) -> bytes:  # noqa: A002 - the template's variable name
        png = store.get(id)
        if png is None:
            raise ResourceNotFoundError(f"{PREFIX}{id[:40]}: no such plot (expired after {store.ttl_s / 60:g} min "
                                        "or dropped for newer ones); call plot again")
        return png
