"""Options written before the command (``memtrio --home X list``), as git and pip take
them: moved to just after the command's words, where its parser reads them."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _takes_value(parser: argparse.ArgumentParser, word: str) -> bool | None:
    """Whether option ``word`` of ``parser`` reads the next word as its value; None when
    ``parser`` has no such option (abbreviations count, as argparse allows them)."""
    if "=" in word or not word.startswith("--") and len(word) > 2:
        return False  # --home=X, -fPATH
    matches = [
        action
        for option, action in parser._option_string_actions.items()
        if option == word or (word.startswith("--") and option.startswith(word))
    ]
    exact = parser._option_string_actions.get(word)
    action = exact or (matches[0] if len({id(a) for a in matches}) == 1 else None)
    if action is None:
        return None
    return action.nargs is None and not isinstance(
        action, (argparse._StoreConstAction, argparse._CountAction, argparse._HelpAction)
    )


def hoist_options(
    argv: Sequence[str],
    build_parser: Callable[[str], argparse.ArgumentParser],
    known: Sequence[str],
) -> list[str]:
    """``memtrio --home X list`` as ``memtrio list --home X``: options written before the
    command (as git and pip allow) move to just after its words (``code index``), where
    the command's parser reads them. ``--help``/``--version`` alone, or options the
    command does not take, stay where they are (and argparse says so).

    A word that names a command can also be an option's value (``--home list list``):
    the command is the first one after which the options before it parse whole.
    ``build_parser(command)`` is the parser that knows ``command`` (one of ``known``).
    """
    argv = list(argv)
    if not argv or not argv[0].startswith("-") or argv[0] in ("-h", "--help", "--version"):
        return argv
    for at, word in enumerate(argv):
        if word == "--":
            break
        if word not in known:
            continue
        path = [word]
        parser = _subcommands(build_parser(word))[word]
        rest = argv[at + 1 :]
        while (children := _subcommands(parser)) and rest and rest[0] in children:
            parser = children[rest[0]]
            path.append(rest.pop(0))
        leading, i = argv[:at], 0
        while i < len(leading):
            takes = _takes_value(parser, leading[i])
            if takes is None or not leading[i].startswith("-"):
                break
            i += 2 if takes else 1
        if i == len(leading):
            return [*path, *leading, *rest]
    return argv
