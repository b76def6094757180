"""`setpoint completion bash|zsh|fish`: print a static shell completion script.

The script is generated from the command line's parser and the kinds known at that moment
(the built-in ones and those of --kinds / SETPOINT_KINDS): verbs, each verb's options and
their choices, and kinds (plural, singular and short names) are written into it, so a TAB
runs no Python for them. Only object names are looked up when completed, by running
`setpoint get KIND -o name` with the --store, --kinds and -n of the line being completed.

What a positional argument completes follows from its metavar: `KIND` a kind, `NAME...`
after a KIND that kind's objects, `KIND/NAME` (or `deployment/NAME`, or a lone `NAME`) a
kind then its objects, anything with FILE or DIR a path, and choices their values. zsh
uses the bash script through `bashcompinit`; fish gets its own. Prints nothing else and
touches no store.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from dataclasses import dataclass, field

from setpoint import __version__
from setpoint.cli.context import Context
from setpoint.model.kinds import Registry

SHELLS = ("bash", "zsh", "fish")


def add_parser(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
) -> None:
    p = verbs.add_parser(
        "completion",
        parents=parents,
        help="print a shell completion script (bash, zsh or fish)",
        description="Print a completion script for SHELL: verbs, options and kinds are "
        "written into it (those of --kinds too); object names are looked up with `setpoint "
        "get KIND -o name` when completed.",
    )
    p.add_argument("shell", choices=SHELLS, metavar="SHELL", help="bash, zsh or fish")
    p.set_defaults(run=run)


async def run(ctx: Context, args: argparse.Namespace) -> int:
    from setpoint.cli.main import VERBS, build_parser

    parser = build_parser(v.name for v in VERBS)
    print(script(args.shell, command_line(parser), ctx.registry), end="")
    return 0


# -- what to complete, from the parser ----------------------------------------------


@dataclass(frozen=True)
class Command:
    """What one verb (or `verb action`) takes: its options, those that take a value, the
    choices of some, those whose value is a path, and its positionals in order (`kind`,
    `names`, `ref`, `file`, `choice:a,b,c` or `none`; the last one repeats if it is
    `names` or `file`)."""

    name: str
    options: tuple[str, ...]
    valued: tuple[str, ...]
    choices: dict[str, tuple[str, ...]] = field(default_factory=dict)
    path_options: tuple[str, ...] = ()
    positionals: tuple[str, ...] = ()
    actions: tuple[str, ...] = ()
    """For a verb with actions (`rollout status`): their names; each is a `Command` of its own."""


@dataclass(frozen=True)
class CommandLine:
    """The verbs, the top-level (global) options as a `Command`, and every verb's. The
    global options that take a value are passed on to the name lookups."""

    verbs: tuple[str, ...]
    top: Command
    commands: tuple[Command, ...]


def command_line(parser: argparse.ArgumentParser) -> CommandLine:
    """Everything completion needs from the full parser (every verb built)."""
    sub = _subparsers(parser)
    assert sub is not None
    commands: list[Command] = []
    for name, verb_parser in sub.choices.items():
        commands += _commands(name, verb_parser)
    top = _commands("", parser)[0]
    return CommandLine(tuple(sub.choices), top, tuple(commands))


def _subparsers(
    parser: argparse.ArgumentParser,
) -> argparse._SubParsersAction[argparse.ArgumentParser] | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


def _commands(name: str, parser: argparse.ArgumentParser) -> list[Command]:
    options: list[str] = []
    valued: list[str] = []
    choices: dict[str, tuple[str, ...]] = {}
    paths: list[str] = []
    positionals: list[str] = []
    out: list[Command] = []
    actions: tuple[str, ...] = ()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            actions = tuple(action.choices)
            for action_name, action_parser in action.choices.items():
                out += _commands(f"{name} {action_name}", action_parser)
            continue
        metavar = str(action.metavar or action.dest).upper()
        if action.option_strings:
            options += action.option_strings
            if action.nargs != 0:
                valued += action.option_strings
                if action.choices:
                    choices.update(dict.fromkeys(action.option_strings, _strings(action.choices)))
                elif "FILE" in metavar or "DIR" in metavar:
                    paths += action.option_strings
        elif action.choices:
            positionals.append("choice:" + ",".join(_strings(action.choices)))
        elif "/NAME" in metavar:
            positionals.append("ref")
        elif metavar == "KIND":
            positionals.append("kind")
        elif metavar == "NAME":
            positionals.append("names" if positionals[-1:] == ["kind"] else "ref")
        elif "FILE" in metavar or "DIR" in metavar:
            positionals.append("file")
        else:
            positionals.append("none")
    command = Command(
        name, tuple(options), tuple(valued), choices, tuple(paths), tuple(positionals), actions
    )
    return [command, *out]


def _strings(values: Iterable[object]) -> tuple[str, ...]:
    return tuple(str(v) for v in values)


def kind_names(registry: Registry) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Every name a kind answers to (plural, singular, short names), and the singular names
    alone (what `KIND/NAME` completes)."""
    every: dict[str, None] = {}
    singular: dict[str, None] = {}
    for kind in registry:
        every.update(dict.fromkeys((kind.plural, kind.singular, *kind.short_names)))
        singular[kind.singular] = None
    return tuple(every), tuple(singular)


# -- the scripts ----------------------------------------------------------------------


def script(shell: str, line: CommandLine, registry: Registry) -> str:
    """The completion script for `shell` (one of `SHELLS`)."""
    kinds, refs = kind_names(registry)
    if shell == "fish":
        return _fish(line, kinds, refs)
    text = _bash(line, kinds, refs)
    if shell == "zsh":
        return (
            f"#compdef setpoint\n# zsh completion for setpoint {__version__}: the bash "
            "completion, through bashcompinit.\n"
            "autoload -U +X bashcompinit && bashcompinit\n" + text
        )
    return text


def _words(values: Iterable[str]) -> str:
    return " ".join(values)


def _bash_cases(pairs: Iterable[tuple[str, str]]) -> str:
    return "".join(f"        \"{key}\") printf '%s\\n' '{value}' ;;\n" for key, value in pairs)


def _bash_global_prev(top: Command) -> str:
    """The cases of the word before the cursor being a global option that takes a value:
    a path for those that want one, nothing for the others."""
    paths = "|".join(top.path_options)
    others = "|".join(o for o in top.valued if o not in top.path_options)
    out = f'        {paths}) COMPREPLY=($(compgen -f -- "$cur")); return 0 ;;\n' if paths else ""
    return out + (f"        {others}) return 0 ;;\n" if others else "")


def _bash(line: CommandLine, kinds: tuple[str, ...], refs: tuple[str, ...]) -> str:
    cmds = line.commands
    return (
        _BASH.replace("@VERSION@", __version__)
        .replace("@VERBS@", _words(line.verbs))
        .replace("@GLOBAL@", _words(line.top.options))
        .replace("@GLOBAL_VALUED@", "|".join(line.top.valued))
        .replace("@GLOBAL_EQUALS@", "|".join(f"{o}=*" for o in line.top.valued if o[1] == "-"))
        .replace("@GLOBAL_PREV@", _bash_global_prev(line.top))
        .replace("@KINDS@", _words(kinds))
        .replace("@REFS@", _words(f"{r}/" for r in refs))
        .replace("@OPTIONS@", _bash_cases((c.name, _words(c.options)) for c in cmds))
        .replace("@VALUED@", _bash_cases((c.name, _words(c.valued)) for c in cmds))
        .replace("@ACTIONS@", _bash_cases((c.name, _words(c.actions)) for c in cmds if c.actions))
        .replace("@POSITIONALS@", _bash_cases((c.name, _words(c.positionals)) for c in cmds))
        .replace(
            "@CHOICES@",
            _bash_cases(
                (f"{c.name} {opt}", _words(values))
                for c in cmds
                for opt, values in c.choices.items()
            ),
        )
        .replace(
            "@PATHS@",
            _bash_cases((f"{c.name} {opt}", "file") for c in cmds for opt in c.path_options),
        )
    )


_BASH = r"""# bash completion for setpoint @VERSION@, generated by `setpoint completion bash`.
# Verbs, options and kinds are written below; object names come from `setpoint get KIND -o name`.

_setpoint_options() {
    case "$1" in
@OPTIONS@    esac
}
_setpoint_valued() {
    case "$1" in
@VALUED@    esac
}
_setpoint_actions() {
    case "$1" in
@ACTIONS@    esac
}
_setpoint_positionals() {
    case "$1" in
@POSITIONALS@    esac
}
_setpoint_choices() {
    case "$1" in
@CHOICES@@PATHS@    esac
}

# The names of the objects of kind $1, from `setpoint get`, with the line's global options.
_setpoint_names() {
    "${_setpoint_cmd[@]}" "${_setpoint_globals[@]}" get "$1" -o name 2>/dev/null | sed 's|.*/||'
}

_setpoint() {
    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"
    local verb="" command="" word i
    local -a positionals=()
    _setpoint_cmd=("${COMP_WORDS[0]}")
    _setpoint_globals=()
    COMPREPLY=()
    for ((i = 1; i < COMP_CWORD; i++)); do
        word="${COMP_WORDS[i]}"
        case "$word" in
            @GLOBAL_VALUED@)
                _setpoint_globals+=("$word" "${COMP_WORDS[i+1]}"); i=$((i + 1)); continue ;;
            @GLOBAL_EQUALS@) _setpoint_globals+=("$word"); continue ;;
            -*)
                if [[ -n "$command" && " $(_setpoint_valued "$command") " == *" $word "* ]]; then
                    i=$((i + 1))
                fi
                continue ;;
        esac
        if [[ -z "$verb" ]]; then
            verb="$word"; command="$word"
        elif [[ "$command" == "$verb" && -n "$(_setpoint_actions "$verb")" ]]; then
            command="$verb $word"
        else
            positionals+=("$word")
        fi
    done
    case "$prev" in
@GLOBAL_PREV@    esac
    if [[ -z "$verb" ]]; then
        if [[ "$cur" == -* ]]; then
            COMPREPLY=($(compgen -W "@GLOBAL@" -- "$cur"))
        else
            COMPREPLY=($(compgen -W "@VERBS@" -- "$cur"))
        fi
        return 0
    fi
    if [[ "$prev" == -* && " $(_setpoint_valued "$command") " == *" $prev "* ]]; then
        local values
        values="$(_setpoint_choices "$command $prev")"
        if [[ "$values" == file ]]; then
            COMPREPLY=($(compgen -f -- "$cur"))
        elif [[ -n "$values" ]]; then
            COMPREPLY=($(compgen -W "$values" -- "$cur"))
        fi
        return 0
    fi
    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$(_setpoint_options "$command")" -- "$cur"))
        return 0
    fi
    if [[ "$command" == "$verb" && -n "$(_setpoint_actions "$verb")" ]]; then
        COMPREPLY=($(compgen -W "$(_setpoint_actions "$verb")" -- "$cur"))
        return 0
    fi
    local -a wanted=($(_setpoint_positionals "$command"))
    local n=${#positionals[@]} what
    (( ${#wanted[@]} == 0 )) && return 0
    if (( n < ${#wanted[@]} )); then
        what="${wanted[n]}"
    else
        what="${wanted[${#wanted[@]}-1]}"
        [[ "$what" == names || "$what" == file ]] || return 0
    fi
    case "$what" in
        kind) COMPREPLY=($(compgen -W "@KINDS@" -- "$cur")) ;;
        names) COMPREPLY=($(compgen -W "$(_setpoint_names "${positionals[0]%%/*}")" -- "$cur")) ;;
        ref)
            if [[ "$cur" == */* ]]; then
                local kind="${cur%%/*}"
                COMPREPLY=($(compgen -P "$kind/" -W "$(_setpoint_names "$kind")" -- "${cur#*/}"))
            else
                COMPREPLY=($(compgen -W "@REFS@" -- "$cur"))
                compopt -o nospace 2>/dev/null
            fi ;;
        file) COMPREPLY=($(compgen -f -- "$cur")) ;;
        choice:*)
            local choices="${what#choice:}"
            COMPREPLY=($(compgen -W "${choices//,/ }" -- "$cur")) ;;
    esac
    return 0
}
complete -F _setpoint setpoint
"""


def _fish_switch(name: str, pairs: Iterable[tuple[str, str]]) -> str:
    cases = "".join(
        f"        case '{key}'\n            printf '%s\\n' '{value}'\n" for key, value in pairs
    )
    return f'function {name}\n    switch "$argv"\n{cases}    end\nend\n'


def _fish(line: CommandLine, kinds: tuple[str, ...], refs: tuple[str, ...]) -> str:
    cmds = line.commands
    data = "".join(
        (
            _fish_switch("__setpoint_options", ((c.name, _words(c.options)) for c in cmds)),
            _fish_switch("__setpoint_valued", ((c.name, _words(c.valued)) for c in cmds)),
            _fish_switch(
                "__setpoint_actions", ((c.name, _words(c.actions)) for c in cmds if c.actions)
            ),
            _fish_switch("__setpoint_positionals", ((c.name, _words(c.positionals)) for c in cmds)),
            _fish_switch(
                "__setpoint_choices",
                [
                    *((f"{c.name} {o}", _words(v)) for c in cmds for o, v in c.choices.items()),
                    *((f"{c.name} {o}", "file") for c in cmds for o in c.path_options),
                ],
            ),
        )
    )
    return (
        _FISH.replace("@VERSION@", __version__)
        .replace("@DATA@", data)
        .replace("@VERBS@", _words(line.verbs))
        .replace("@GLOBAL@", _words(line.top.options))
        .replace("@GLOBAL_VALUED@", _words(line.top.valued))
        .replace("@GLOBAL_PATHS@", _words(line.top.path_options))
        .replace("@GLOBAL_EQUALS@", "|".join(o for o in line.top.valued if o[1] == "-"))
        .replace("@KINDS@", _words(kinds))
        .replace("@REFS@", _words(f"{r}/" for r in refs))
    )


_FISH = r"""# fish completion for setpoint @VERSION@, generated by `setpoint completion fish`.
# Verbs, options and kinds are written below; object names come from `setpoint get KIND -o name`.

@DATA@
function __setpoint_complete
    set -l words (commandline -opc)
    set -l cur (commandline -ct)
    set -l cmd $words[1]
    set -e words[1]
    set -l globals
    set -l verb
    set -l command
    set -l positionals
    set -l skip 0
    for i in (seq (count $words))
        set -l word $words[$i]
        if test $skip = 1
            set skip 0
            continue
        end
        if contains -- $word @GLOBAL_VALUED@
            set -a globals $word $words[(math $i + 1)]
            set skip 1
            continue
        end
        if string match -q -r -- '^(@GLOBAL_EQUALS@)=' $word
            set -a globals $word
            continue
        end
        if string match -q -- '-*' $word
            set -l valued (string split ' ' -- (__setpoint_valued $command))
            if test -n "$command"; and contains -- $word $valued
                set skip 1
            end
            continue
        end
        if test -z "$verb"
            set verb $word
            set command $word
        else if test "$command" = "$verb"; and __setpoint_actions $verb | string length -q
            set command "$verb $word"
        else
            set -a positionals $word
        end
    end
    set -l prev $words[-1]
    if contains -- "$prev" @GLOBAL_VALUED@
        if contains -- "$prev" @GLOBAL_PATHS@
            __fish_complete_path $cur
        end
        return
    end
    if test -z "$verb"
        if string match -q -- '-*' $cur
            string split ' ' -- '@GLOBAL@'
        else
            string split ' ' -- '@VERBS@'
        end
        return
    end
    set -l valued (string split ' ' -- (__setpoint_valued $command))
    if test -n "$prev"; and string match -q -- '-*' $prev; and contains -- $prev $valued
        set -l values (__setpoint_choices "$command $prev")
        if test "$values" = file
            __fish_complete_path $cur
        else if test -n "$values"
            string split ' ' -- $values
        end
        return
    end
    if string match -q -- '-*' $cur
        string split ' ' -- (__setpoint_options $command)
        return
    end
    if test "$command" = "$verb"; and __setpoint_actions $verb | string length -q
        string split ' ' -- (__setpoint_actions $verb)
        return
    end
    set -l wanted (string split ' ' -- (__setpoint_positionals $command))
    set -l n (math (count $positionals) + 1)
    set -l what
    if test $n -le (count $wanted)
        set what $wanted[$n]
    else if contains -- $wanted[-1] names file
        set what $wanted[-1]
    else
        return
    end
    switch $what
        case kind
            string split ' ' -- '@KINDS@'
        case names
            set -l kind (string split -m1 / -- $positionals[1])[1]
            $cmd $globals get $kind -o name 2>/dev/null | string replace -r '.*/' ''
        case ref
            if string match -q -- '*/*' $cur
                set -l kind (string split -m1 / -- $cur)[1]
                $cmd $globals get $kind -o name 2>/dev/null | string replace -r '.*/' "$kind/"
            else
                string split ' ' -- '@REFS@'
            end
        case file
            __fish_complete_path $cur
        case 'choice:*'
            string split , -- (string replace 'choice:' '' -- $what)
    end
end

complete -c setpoint -f -a '(__setpoint_complete)'
"""
