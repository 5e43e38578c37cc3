"""The store's domain rules, shared by the memory and knowledge-graph tools: memories,
entities and relations, embeddings, scopes and ownership, limits, lexical search."""
