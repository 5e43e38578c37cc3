"""What the embedder workers accept (see ``pool.EmbedderPool``)."""

from __future__ import annotations

from ...protocol.messages import Request


class Embed(Request, tag=True):
    """Embed ``texts``, each as at most ``max_chunks`` windows; the answer is an `EmbedResult`.

    Workers batch several queued requests into one model call.
    """

    texts: list[str]
    max_chunks: int = 1


EmbedderRequest = Embed
