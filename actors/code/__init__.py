"""Code navigation: a tree-sitter index of Git checkouts and the four code tools.

Modules: ``languages`` (grammars and queries), ``extract`` (outline one file),
``wire`` and ``worker`` (the parser worker process and its pipe protocol),
``pool`` (the supervised worker actors), ``index`` (the SQLite code index),
``checkout`` (checkout roots, file listing, path rules), ``diff`` (structural
diff of two revisions), ``tools`` (the MCP tools), ``feature`` and ``cli``.
"""
