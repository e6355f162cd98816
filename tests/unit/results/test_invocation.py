"""run.json's command is one a user can paste into a shell: an entry point's argv[0] is "<program> <subcommand>"
(argparse's prog), which shlex.join alone quoted as one word ('deployment-toolkit-lab pack-bench' --models 100)."""
from __future__ import annotations

import shlex

from deployment_toolkit.results.runinfo import invocation


def test_the_entry_points_program_and_subcommand_are_two_words():
    command = invocation(["deployment-toolkit-lab pack-bench", "--models", "100", "--result-path", "a b"])
    assert command == "deployment-toolkit-lab pack-bench --models 100 --result-path 'a b'"
    assert shlex.split(command)[:2] == ["deployment-toolkit-lab", "pack-bench"]


def test_a_script_path_stays_one_word_even_with_a_space():
    assert invocation(["/home/me/my tools/run.py", "--x", "1"]) == "'/home/me/my tools/run.py' --x 1"
    assert invocation(["triton/run_search.py"]) == "triton/run_search.py"
