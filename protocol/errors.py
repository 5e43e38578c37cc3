"""Domain errors: what went wrong with a request, and whose fault it is.

Domain code (the store, the graph, the code index, the embedder) raises these;
it never builds a wire answer. The session is the one place that turns them
into results: a `DomainError` raised by a tool handler becomes a
``CallToolResult`` with ``isError: true`` carrying the message, never a
JSON-RPC error, and the CLI prints the same message as one line.

The subclass says whose fault the failure is, so a caller (or a log reader)
knows whether to change the request or to retry:

- the caller's: `BadArgument`, `NotFound`, `Forbidden`, `LimitExceeded`, `Conflict`;
- the server's, for now: `Unavailable` (a service is down, starting or overloaded).
"""

from __future__ import annotations


class DomainError(Exception):
    """A request the server refuses or cannot serve; the message says why and what to do."""

    kind = "error"


class BadArgument(DomainError):
    """A value is malformed or outside what the operation accepts."""

    kind = "bad_argument"


class NotFound(DomainError):
    """The named memory, entity, relation, file or revision does not exist (or is not visible)."""

    kind = "not_found"


class Forbidden(DomainError):
    """The request would read or write where this server may not (a scope, a path)."""

    kind = "forbidden"


class LimitExceeded(DomainError):
    """A size, count or depth limit of the server was reached."""

    kind = "limit"


class Conflict(DomainError):
    """The request contradicts the current state (a duplicate, a concurrent change)."""

    kind = "conflict"


class Unavailable(DomainError):
    """A service the request needs is not running, still starting, or failing; retry later."""

    kind = "unavailable"
