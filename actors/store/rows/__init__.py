"""The Python both storage backends share around their SQL, one module per concept.

`sqlite.*` and `pg.*` each keep their own SQL and how they run it; what is the same
whatever the dialect (column lists, row-to-Struct builders, argument checks, the
assembly of a result from rows) is written once here and imported by both. Nothing
here holds a connection or writes a statement.
"""
