"""The Python both storage backends share, one module per concept.

What is the same whatever the dialect (column lists, row-to-Struct builders, argument
checks, the assembly of a result from rows, and the method bodies of each concept's base
class: `memories.MemoriesBase`, `graph.GraphBase`, ...) is written once here. A
backend's class mixes its runner of `sql.Rows` into the base and names its statements
in its own dialect; a statement that reads the same in both dialects and takes no
placeholder is written once in the base. Nothing here opens a connection or rewrites a
statement from one dialect to the other.
"""
