"""Code anchors of memories (issue #33): what the memory and knowledge-graph tools share.

`anchoring` joins the code index (`actors.code`: targets, digests, statuses) and the
store (`interfaces.anchors`): anchors given or found for a text, their statuses in the
session's repository, the stale penalty. `args` holds the tools' ``code`` argument.
Its own package so that both feature packages (``memory`` and ``kg``) can use it
without importing each other.
"""
