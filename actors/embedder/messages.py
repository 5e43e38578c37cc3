"""What the embedder workers accept (see ``pool.EmbedderPool``)."""

from __future__ import annotations

from ...protocol.messages import Request


class Embed(Request, frozen=True, tag=True):
    """Embed ``texts``, each as at most ``max_chunks`` windows; the answer is an `EmbedResult`.

    Workers batch several queued requests into one model call.
    """

    texts: list[str]
    max_chunks: int = 1


class Warm(Request, frozen=True, tag=True):
    """Load the model now, so the first `Embed` does not wait for it; answered with None
    (a model that cannot load is logged and reported by the next `Embed`)."""


EmbedderRequest = Embed | Warm
