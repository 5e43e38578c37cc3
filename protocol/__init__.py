"""Pure protocol code: JSON-RPC envelope, MCP lifecycle, tool registry, messages. No I/O."""
