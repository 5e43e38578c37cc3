"""Code navigation: a tree-sitter index of Git checkouts and the four code tools.

Modules: ``languages`` (grammars and queries), ``extract`` (outline one file),
``files`` (reading checkout files without following symlinks), ``wire`` and
``worker`` (the parser worker process and its pipe protocol), ``messages``
(what the parser workers accept), ``pool`` (the supervised worker actors),
``index`` (the SQLite code index), ``service`` (refreshing and querying it),
``checkout`` (checkout roots, file listing, path rules), ``diff`` (structural
diff of two revisions), ``tools`` (the MCP tools), ``feature`` and ``cli``.
Errors a caller sees are `protocol.errors` domain errors.
"""
