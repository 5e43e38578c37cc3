"""The code feature: the code index, the parser pool and the four code tools.

``setup`` raises `FeatureDisabled` (the server then starts with the memory
tools only, quietly: the user chose it) when ``[code] enabled = false`` /
``MEMTRIO_CODE=off`` or when the ``code`` tool group is not enabled, and
`FeatureUnavailable` (the same, after one warning) when ``[code]`` is invalid
(a bad value or unknown key in config.toml, the environment or a flag:
``Config.invalid``) or the index file cannot be opened or recreated.
"""

from __future__ import annotations

from ...supervisors.context import AppContext, FeatureDisabled, FeatureUnavailable
from ...supervisors.supervisor import ChildSpec
from .index import CodeIndex, IndexUnavailable, index_path
from .pool import ParserPool, default_workers
from .service import CODE, CodeService
from .tools import INSTRUCTIONS, TOOLS

DISABLED = "code navigation is disabled ([code] enabled = false or MEMTRIO_CODE=off)"


def open_service(app: AppContext) -> CodeService:
    """Check ``[code]``, open the index and build the service (no actors started yet)."""
    cfg = app.config.code
    invalid = app.config.invalid.get("code")
    if invalid is not None:
        raise FeatureUnavailable(
            f"invalid [code] setting: {invalid}; code navigation is off until it is fixed"
        )
    if not cfg.enabled:
        raise FeatureDisabled(DISABLED)
    if not cfg.file_timeout > 0:
        raise FeatureUnavailable(
            f"invalid [code] file_timeout {cfg.file_timeout!r}: must be > 0 seconds"
        )
    try:
        index = CodeIndex(index_path(app.home))
    except IndexUnavailable as exc:
        raise FeatureUnavailable(str(exc)) from None
    pool = ParserPool(default_workers(cfg.index_threads), cfg.file_timeout)
    return CodeService(index, pool, cfg.max_files)


class _CodeFeature:
    name = "code"

    def setup(self, app: AppContext) -> CodeComponent:
        if "code" not in app.config.tools.enabled:
            raise FeatureDisabled("the code tool group is not enabled ([tools] enabled)")
        service = open_service(app)
        app.publish(CODE, service)
        app.add_tools(TOOLS)
        app.instructions.append(INSTRUCTIONS)
        return CodeComponent(service)


class CodeComponent:
    """Owns the code service (index and parser pool); its actors are the pool's workers."""

    def __init__(self, service: CodeService) -> None:
        self.service = service

    def children(self) -> list[ChildSpec]:
        return self.service.pool.children()


FEATURE = _CodeFeature()
