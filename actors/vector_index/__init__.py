"""The vector index library (exact, hnsw on usearch, ivf): a leaf package, imported by
the ranker and the vector tools, importing no feature."""
