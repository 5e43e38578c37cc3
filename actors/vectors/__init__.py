"""Vector indexes: one interface (`index.VectorIndex`), three backends (exact, hnsw, ivf)."""
