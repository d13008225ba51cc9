"""Red team, command runners by other names: ``x86_64 rm victim`` ran past ``bash(rm *)``.

util-linux installs ``setarch`` under the names of the architectures it sets (``i386``,
``x86_64``...), and each runs the command after it; the guard knew ``setarch``, ``linux32`` and
``linux64`` only. Those names, and a few more runners (``torify``, ``caffeinate``, ``xe``,
``with-lock-ex``, ``retry``), are opaque now: denied where nobody can answer. So are
programs installed here that run a command given to them (``msgexec``, ``systemd-cat``,
``memusage``, ``luit``...), Debian's other names of vim, gdb and perl (``vim.basic``, ``gdbtui``,
``perl5.36-x86_64-linux-gnu``), ``groff -U`` (its ``.sy`` runs a command), and a long option
spelt by its beginning, which getopt_long and git take for the whole (``split --filt=cmd``,
``git rebase --exe=cmd``): the guard knew only the whole name.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from jianmu.guard._shell import scan
from tests.security.test_shell_rules import DENY_RM, send, workspace

pytestmark = pytest.mark.anyio


@pytest.mark.skipif(shutil.which("x86_64") is None, reason="util-linux's x86_64 link is absent")
@pytest.mark.parametrize("command", ["x86_64 rm victim", "x86_64 -R rm victim"])
async def test_setarch_by_an_architectures_name_is_refused(tmp_path: Path, command: str) -> None:
    ws = workspace(tmp_path)
    _, said = await send(ws, command, DENY_RM, interactive=False)
    assert "denied" in said, said
    assert (ws / "victim").read_text() == "keep me\n"


def has(program: str) -> bool:
    return shutil.which(program) is not None


@pytest.mark.parametrize(
    ("command", "program"),
    [("echo a > x; split --filt='rm victim' x", "split"),
     ("split --f='rm victim' x", "split"),
     ("git init -q . && git config user.name a && git config user.email a@b && "
      "git commit -q --allow-empty -m a && git commit -q --allow-empty -m b && "
      "git rebase --exe='rm victim' HEAD~1", "git"),
     ("vim.basic -es -c '!rm victim' -c q", "vim.basic"),
     ("perl5.36-x86_64-linux-gnu -e 'unlink \"victim\"'", "perl5.36-x86_64-linux-gnu"),
     ("echo '.sy rm victim' | groff -U", "groff"), ("memusage rm victim", "memusage")],
)  # fmt: skip
async def test_more_spellings_of_a_runner_are_refused(
    tmp_path: Path, command: str, program: str
) -> None:
    if not has(program):
        pytest.skip(f"{program} is not installed here")
    ws = workspace(tmp_path)
    _, said = await send(ws, command, DENY_RM, interactive=False)
    assert "denied" in said, said
    assert (ws / "victim").read_text() == "keep me\n"


@pytest.mark.parametrize(
    "command",
    ["tar --to-comm='rm victim' -xf x.tar", "sort --compress-prog=rm x",
     "tar --checkpoint-act=exec='rm victim' -cf x .",
     "wget --use-ask='rm victim' x", "git fetch --upload-pa='rm victim' x",
     "git grep --open-files='rm victim' x", "man --pag='rm victim' ls",
     "sdiff --diff-prog='rm victim' a b", "install --strip-prog='rm victim' -s a b",
     "ncat --sh-ex='rm victim' -l 1", "gpg --photo-viewer 'rm victim' --list-keys",
     "runc run x", "msgexec -i x.po rm victim", "systemd-cat rm victim", "luit rm victim",
     "debconf-apt-progress -- rm victim", "gdbtui -batch -ex 'shell rm victim'",
     "rview -c '!rm victim'", "wish8.6 x", "pdb3 x.py", "slogin host rm victim"],
)  # fmt: skip
def test_a_long_option_by_its_beginning_or_a_runner_by_another_name_is_opaque(
    command: str,
) -> None:
    assert scan(command).opaque


@pytest.mark.parametrize(
    "command",
    ["git log --oneline", "git fetch --all", "tar -xf x.tar", "sort -u x", "split -l 2 x",
     "groff -Tutf8 x", "perl5.36-x86_64-linux-gnu --version"],
)  # fmt: skip
def test_ordinary_options_stay_readable(command: str) -> None:
    assert not scan(command).opaque


@pytest.mark.parametrize(
    "runner", ["i386", "i686", "x86_64", "uname26", "aarch64", "ppc64le", "s390x", "torify",
               "caffeinate", "xe", "with-lock-ex", "retry"],
)  # fmt: skip
def test_a_runner_by_any_name_is_opaque(runner: str) -> None:
    assert scan(f"{runner} rm victim").opaque
