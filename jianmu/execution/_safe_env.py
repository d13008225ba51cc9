"""Environment every sandboxed command gets: git's code-running settings neutralised.

An allow rule such as ``bash(git status*): allow`` is not a code-execution boundary (the
sandbox is), but git should not run code that a workspace file chose. A repository config the
model wrote (a bare repository outside ``.git/``, or ``.git/config``) can name commands that
git runs: ``core.fsmonitor``, hooks, pagers, editors, ``core.sshCommand``, ``diff.external``,
signing programs, credential helpers. Settings passed through ``GIT_CONFIG_COUNT`` have
command-line scope and win over every config file, and ``safe.bareRepository=explicit`` makes
git refuse a bare repository it merely discovered. Not covered: drivers the repository names
itself (``filter.<name>.clean``, ``diff.<name>.textconv``, ``merge.<name>.driver`` with a
``.gitattributes`` line), whose names cannot be listed in advance; such code still runs inside
the sandbox, without network, root or leftovers.
"""

from __future__ import annotations

__all__ = ("GIT_OVERRIDES", "safe_git_env")

# A plain unified diff from diff(1), called the way git calls an external diff
# (path old-file old-hex old-mode new-file new-hex new-mode): it replaces any diff.external.
_PLAIN_DIFF = (
    'f() { echo "diff --git a/$1 b/$1"; diff -u --label "a/$1" --label "b/$1" "$2" "$5"; '
    '[ $? -le 1 ]; }; f'
)

GIT_OVERRIDES: tuple[tuple[str, str], ...] = (
    ("safe.bareRepository", "explicit"),
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("core.editor", "true"),
    ("sequence.editor", "true"),
    ("core.sshCommand", "ssh"),
    ("core.askPass", ""),
    ("credential.helper", ""),  # an empty value resets the list of helpers
    ("diff.external", _PLAIN_DIFF),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("gpg.program", "gpg"),
    ("gpg.ssh.program", "ssh-keygen"),
    ("gpg.x509.program", "gpgsm"),
    ("protocol.ext.allow", "never"),
    ("core.attributesFile", "/dev/null"),
)
"""``(key, value)`` pairs given to git with command-line precedence."""


def safe_git_env() -> dict[str, str]:
    """The variables that make git ignore the code-running settings of any config file."""
    env = {
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_PAGER": "cat",  # wins over core.pager and pager.<command>
        "PAGER": "cat",
        "GIT_EDITOR": "true",
        "GIT_SEQUENCE_EDITOR": "true",
        "GIT_ASKPASS": "true",
        "GIT_CONFIG_COUNT": str(len(GIT_OVERRIDES)),
    }
    for index, (key, value) in enumerate(GIT_OVERRIDES):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    return env
