"""The memory store: SQLite schema, the StoreWriter actor, scopes and the memory tools."""
