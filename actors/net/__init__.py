"""Network transports of ``memtrio serve``: Streamable HTTP, TCP and WebSocket, their
listen settings and bearer auth, the table of live connections, and the attach
relay of a ``memtrio mcp`` child (docs/transports.md)."""
