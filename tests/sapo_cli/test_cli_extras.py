"""Every missing piece names its fix: ``sapo-gym envs`` says what each env needs and whether it is usable
here, and a command whose optional package is missing says which extra to install (packages hidden in a
subprocess, ``tests/support/blocked.py``)."""

from __future__ import annotations

from tests.support.blocked import run_without

_CLI = "import sys; sys.argv[1:] = {args!r}\nfrom sapo_cli import main\nraise SystemExit(main(sys.argv[1:]))"


def _cli_without(hidden: tuple[str, ...], *args: str):
    return run_without(_CLI.format(args=list(args)), hidden, hidden)


def _needs(stdout: str) -> dict[str, list[str]]:
    """env id -> its needs / optional / usable lines."""
    table: dict[str, list[str]] = {}
    for line in stdout.splitlines():
        if line and not line.startswith(" "):
            table[line.split()[0]] = []
        elif line.startswith(("    needs: ", "    optional: ", "    usable here: ")):
            table[list(table)[-1]].append(line.strip())
    return table


def test_envs_says_what_each_env_needs_and_whether_it_is_usable():
    table = _needs(_cli_without((), "envs", "--no-counts").stdout)
    for env_id in ("sapo/ALFWorld-v0", "sapo/ALFWorld-Mini-v0", "sapo/WebShop-v0", "sapo/Vault-v0"):
        assert (
            table[env_id][0] == "needs: nothing beyond pip install sapo-gym" and table[env_id][-1] == "usable here: yes"
        )
    assert (
        'optional: pip install \'sapo-gym[alfworld]\' for engine="reference", expert="planner"'
        in table["sapo/ALFWorld-v0"]
    )
    browser = table["sapo/WebShop-Browser-v0"]
    assert browser[0] == "needs: pip install 'sapo-gym[browser,webshop]', /usr/bin/chromium, /usr/bin/chromedriver"
    hidden = _needs(_cli_without(("selenium", "alfworld", "textworld"), "envs", "--no-counts").stdout)
    assert hidden["sapo/WebShop-Browser-v0"][-1] == (
        "usable here: no, selenium: ModuleNotFoundError: No module named 'selenium' (pip install 'sapo-gym[browser,webshop]')"
    )
    assert hidden["sapo/ALFWorld-v0"][-1] == hidden["sapo/ALFWorld-Mini-v0"][-1] == "usable here: yes"


def test_train_without_torch_names_the_train_extra():
    done = _cli_without(("torch",), "train", "--env", "sapo/Vault-v0")
    assert done.returncode == 2
    assert (
        done.stderr.strip()
        == "error: sapo-gym train needs the train extra (no module named 'torch'): pip install 'sapo-gym[train]'"
    )


def test_env_serve_without_openenv_names_the_serve_extra():
    done = _cli_without(("openenv",), "env", "serve", "sapo/Vault-v0")
    assert done.returncode == 2 and "sapo-gym[serve]" in done.stderr and "openenv==0.10.0" in done.stderr, done.stderr
