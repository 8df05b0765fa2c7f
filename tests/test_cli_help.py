"""``cudagraph-bench --help`` and every sub-command's ``--help``: exit 0 and describe, for users, what the
command does, what it reads, what it writes and its exit codes (not a module docstring)."""

import re

import pytest

from cudagraph_bench import cli


def help_text(capsys, *argv) -> str:
    with pytest.raises(SystemExit) as exc:
        cli.main([*argv, "--help"])
    out, err = capsys.readouterr()
    assert exc.value.code == 0 and err == ""
    return out


def description(text: str) -> str:
    """The text between the usage block and the first argument section of a help page, unwrapped."""
    body = text.split("\n\n", 1)[1]
    body = re.split(r"\n(?:positional arguments|options):\n", body, maxsplit=1)[0]
    return " ".join(body.split())


def test_every_command_has_a_description():
    assert set(cli.DESCRIPTIONS) == set(cli.COMMANDS)


@pytest.mark.parametrize("command", list(cli.COMMANDS))
def test_command_help_describes_what_it_reads_writes_and_exits_with(capsys, command):
    text = help_text(capsys, command)
    assert text.startswith(f"usage: cudagraph-bench {command} ")
    desc = description(text)
    assert desc == " ".join(cli.DESCRIPTIONS[command].split())
    for part in ("Input:", "Output", "Exit codes: 0 "):
        assert part in desc, f"{command} --help says nothing after {part!r}"
    assert "2 usage error" in desc
    # written for users: no reST markup, module paths or Python names pasted from a docstring
    assert not re.search(r"``|:func:|:mod:|:data:|cudagraph_bench\.", desc), desc


def test_top_level_help_lists_every_command_and_the_exit_codes(capsys):
    text = help_text(capsys)
    for command in cli.COMMANDS:
        assert re.search(rf"^\s+{re.escape(command)}\b", text, re.M), command
    flat = " ".join(text.split())
    assert " ".join(cli.DESCRIPTION.split()) in flat
    assert "Exit codes: 0 success" in flat and "2 usage error" in flat
    assert "front-end" not in flat and "``" not in flat


def test_paragraphs_of_a_description_stay_apart(capsys):
    text = help_text(capsys, "gate")
    paragraphs = [p for p in text.split("\n\n") if p.startswith(("Input:", "Output:", "Exit codes:"))]
    assert [p.split(":", 1)[0] for p in paragraphs] == ["Input", "Output", "Exit codes"]


@pytest.mark.parametrize("command", list(cli.COMMANDS))
def test_an_unknown_option_of_a_command_points_at_that_commands_help(capsys, command):
    # the first optional option of the command, misspelt by swapping two letters: the message suggests it
    # (required options are given, so that argparse's own "required" error does not come first)
    parser = cli.build_parser().command_parsers[command]
    required = [a.option_strings[-1] for a in parser._actions if a.required and a.option_strings]
    option = next(s for a in parser._actions if not a.required for s in a.option_strings
                  if s.startswith("--") and len(s) > 6 and s != "--help")
    i = next(i for i in range(3, len(option) - 1) if option[i] != option[i + 1])   # "--allow": not the two l's
    typo = option[:i] + option[i + 1] + option[i] + option[i + 2:]
    with pytest.raises(SystemExit) as exc:
        cli.main([command, *[arg for flag in required for arg in (flag, "x")], typo, "x"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1
    assert err.startswith(f"cudagraph-bench {command}: error: unrecognized arguments: {typo}")
    assert f"did you mean {option}?" in err and err.rstrip().endswith(f"(see cudagraph-bench {command} --help)")


def test_allow_takes_the_words_its_command_honours_comma_separated_or_repeated(capsys):
    with pytest.raises(SystemExit) as exc:   # report honours no missing gated case
        cli.main(["report", "run.json", "--allow", "gpu-mismatch,missing"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1
    assert err.startswith("cudagraph-bench report: error: --allow missing: expected one of interrupted, overlap, gpu-mismatch "
                          "(comma-separated) (see cudagraph-bench report --help)")
    parser = cli.build_parser()
    assert not any(vars(parser.parse_args(["compare", "a", "b"]))[k] for k in ("allow_missing", "allow_gpu_mismatch"))
    for allow in (["gpu-mismatch,missing"], ["gpu-mismatch", "--allow", "missing"]):
        args = parser.parse_args(["compare", "a", "b", "--allow", *allow])
        assert args.allow_gpu_mismatch and args.allow_missing and not args.allow_interrupted
    with pytest.raises(SystemExit) as exc:   # the flag of an allowance before --allow: its new spelling
        cli.main(["gate", "run.json", "--allow-missing"])
    assert exc.value.code == 2 and "did you mean --allow missing?" in capsys.readouterr().err


@pytest.mark.parametrize("argv, hint", [
    (["report", "r.json", "--newest-wins"], "did you mean --allow overlap?"),
    (["gate", "r.json", "--no-baseline"], "did you mean --baseline none?"),
    (["ab", "--base", "a", "--head", "b", "--pytest-args", "--models gpt2"], "give pytest's arguments after --"),
    (["compare", "--old", "a", "--new", "b", "--storage", "d"], "looked up in $CUDAGRAPH_BENCH_STORAGE"),
])
def test_an_option_that_moved_names_what_to_give_instead(capsys, argv, hint):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and hint in err


#: Options a user can meet: every shown option of every command (``--help`` left out), and the plugin's pytest options.
CLI_OPTION_BUDGET, PYTEST_OPTION_BUDGET = 75, 28


def test_the_commands_and_the_plugin_keep_within_their_option_budgets():
    """Each switch a user must learn costs: the commands share ``--allow`` and take pytest's arguments after ``--``
    instead of restating them; no command keeps a hidden spelling of an option."""
    import argparse

    from cudagraph_bench.plugin import pytest_options, session_journal, sharding, zoo_tests

    parser = cli.build_parser()
    shown = hidden = 0
    for sub in parser.command_parsers.values():
        for action in sub._actions:
            if action.option_strings and not isinstance(action, argparse._HelpAction):
                hidden += action.help == argparse.SUPPRESS
                shown += action.help != argparse.SUPPRESS
    assert hidden == 0 and 0 < shown <= CLI_OPTION_BUDGET

    shown_in_pytest = []

    class Recorder:
        """Stands in for pytest's parser and its option group: records each option ``--help`` shows."""

        def getgroup(self, *args, **kwargs):
            return self

        def addoption(self, *names, **kwargs):
            if kwargs.get("help") != argparse.SUPPRESS:
                shown_in_pytest.append(names[0])

        def addini(self, *args, **kwargs):
            pass

    for plugin in (pytest_options, sharding, session_journal, zoo_tests):
        plugin.pytest_addoption(Recorder())
    assert 0 < len(shown_in_pytest) <= PYTEST_OPTION_BUDGET
