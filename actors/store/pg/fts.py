"""PostgreSQL statements of the vector search that still live outside a storage interface.

The full-text statements moved to `pg.fulltext` (`interfaces.fulltext.FullText` on
PostgreSQL); what is left here belongs to the vectors concept and moves with it.
"""

from __future__ import annotations

# The memories nearest a query vector by pgvector's HNSW indexes (cosine), every window
# of a memory counted (its best):
# (query, model, revision, query, n, query, model, revision, query, n).
DENSE_MEMORIES = """SELECT item_id, max(cosine) AS best FROM (
    (SELECT item_id, 1 - (embedding::vector(384) <=> ?::real[]::vector(384)) AS cosine
       FROM vectors WHERE kind = 'memory' AND dim = 384 AND embedding IS NOT NULL
        AND model = ? AND revision = ?
      ORDER BY embedding::vector(384) <=> ?::real[]::vector(384) LIMIT ?)
    UNION ALL
    (SELECT item_id, 1 - (embedding::vector(384) <=> ?::real[]::vector(384)) AS cosine
       FROM vector_chunks WHERE kind = 'memory' AND dim = 384 AND embedding IS NOT NULL
        AND model = ? AND revision = ?
      ORDER BY embedding::vector(384) <=> ?::real[]::vector(384) LIMIT ?)
) near GROUP BY item_id ORDER BY best DESC"""
