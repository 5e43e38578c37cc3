"""The storage layer: the neutral plumbing at the root (backend, connections, the StoreWriter
actor), SQLite's and PostgreSQL's packages (sqlite/, pg/), the domain rules of the memory and
graph tools (domain/) and what a tool call or CLI command needs around them (tooling/)."""
