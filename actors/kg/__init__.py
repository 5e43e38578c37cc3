"""The knowledge graph: the reference memory server's tools over the memory store."""
