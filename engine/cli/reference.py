"""The CLI reference as Markdown, read from the parser itself.

The docs site renders this page at build time (docs/hooks/cli_reference.py), so every flag the
parser accepts is documented with the help the parser prints, and nothing else. A flag without
help is a gap in the docs: `undocumented` lists them, and the test suite fails on any.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

# argparse keeps its actions and sub-parsers in private attributes; they are stable since 3.2 and
# are what its own help formatter reads.
_SubParsers = argparse._SubParsersAction


def verbs(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each sub-command, in the order `--help` lists them."""
    for action in parser._actions:
        if isinstance(action, _SubParsers):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name, ""), sub


def documented_actions(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    """The parser's own arguments, without -h/--help and the sub-command selector."""
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, _SubParsers)):
            continue
        yield action


def undocumented(parser: argparse.ArgumentParser) -> list[str]:
    """'verb --flag' for every argument, top-level or of a verb, that has no help text."""
    missing = [_name(action) for action in documented_actions(parser) if not _has_help(action)]
    for verb, verb_help, sub in verbs(parser):
        if not verb_help.strip():
            missing.append(verb)
        missing += [f"{verb} {_name(a)}" for a in documented_actions(sub) if not _has_help(a)]
    return missing


def render_markdown(parser: argparse.ArgumentParser) -> str:
    """The whole reference: the global flags, then one section per verb."""
    parts = [_section(f"`{parser.prog}`", parser.description or "", parser, level=2)]
    for verb, verb_help, sub in verbs(parser):
        parts.append(_section(f"`{parser.prog} {verb}`", verb_help, sub, level=2))
    return "\n\n".join(parts) + "\n"


def _section(title: str, summary: str, parser: argparse.ArgumentParser, level: int) -> str:
    usage = " ".join(parser.format_usage().split())
    lines = [f"{'#' * level} {title}", "", summary.strip(), "", "```text", usage, "```", ""]
    rows = [_row(action) for action in documented_actions(parser)]
    if rows:
        lines += ["| argument | help |", "| --- | --- |", *rows]
    return "\n".join(line for line in lines if line is not None)


def _row(action: argparse.Action) -> str:
    flags = ", ".join(f"`{s}`" for s in action.option_strings) or f"`{action.dest}`"
    extra = ""
    if action.choices and not isinstance(action.choices, dict):
        extra = " Choices: " + ", ".join(f"`{c}`" for c in action.choices) + "."
    return f"| {flags} | {_cell(action.help or '')}{extra} |"


def _cell(text: str) -> str:
    """Help text safe inside a Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|").replace("%%", "%")


def _name(action: argparse.Action) -> str:
    return action.option_strings[-1] if action.option_strings else action.dest


def _has_help(action: argparse.Action) -> bool:
    return bool(action.help) and action.help != argparse.SUPPRESS
