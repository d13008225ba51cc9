"""Whether a container shows each read-only folder it was given, and nothing else in its place.

Docker binds a host folder by path and follows a link on the way; inside the container it also
follows a link at the target (within the container's root). `DockerSandbox` checks each of the
workspace's read-only paths before it starts the container, but code of another sandbox on the
same workspace can swap one for a link to a host folder between that check and the mount: the
host folder was then shown in the container, at the target or wherever the link led. So once
the container runs, each target must be a mount point (`MOUNT_PROBE` lists the mount table)
holding the very folder that was checked (its ``st_dev`` and ``st_ino``): one volume makes one
mount, so when every target holds its own folder, no volume's mount went anywhere else.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ("MOUNT_PROBE", "mount_problem")

_SPLIT = "@@jianmu-stat@@"
MOUNT_PROBE = (
    "cat /proc/self/mountinfo; echo; echo " + _SPLIT + "; "
    'for t; do stat -c "%d %i" -- "$t" 2>/dev/null || echo "- -"; done'
)
"""A ``/bin/sh -c`` script, given ``/workspace`` and the targets as arguments: the mount
table, then each one's ``st_dev st_ino`` (without following a link), one line each."""
_ESCAPE = re.compile(r"\\([0-7]{3})")


def _unescape(field: str) -> str:
    """A mountinfo path, its octal escapes (``\\040`` for a space) decoded."""
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), field)


def mount_problem(
    output: str, expected: Mapping[str, tuple[int, int]], workspace: tuple[int, int],
) -> str | None:
    """What is wrong with the container's mounts, as `MOUNT_PROBE` printed them for
    ``/workspace`` then the targets of ``expected`` (target -> the checked folder's
    ``(st_dev, st_ino)``), or ``None`` when each target holds its folder.

    ``workspace`` is the workspace's own identity on the host: where the container does not
    show the same (a file-sharing layer between the host and Docker's machine numbers files
    anew), identities cannot be compared, and only the mount points are checked.
    """
    table, found, stats = output.partition(f"\n{_SPLIT}\n")
    if not found:
        return "the container's mount table could not be read"
    points = {_unescape(fields[4]) for fields in
              (line.split(" ") for line in table.splitlines()) if len(fields) > 4}
    lines = [line.split() for line in stats.splitlines()]
    comparable = bool(lines) and lines[0] == [str(workspace[0]), str(workspace[1])]
    for index, (target, identity) in enumerate(expected.items(), start=1):
        if target not in points:
            return f"{target} is not a mount point in the container"
        seen = lines[index] if index < len(lines) else []
        if comparable and seen != [str(identity[0]), str(identity[1])]:
            return f"{target} does not hold the folder that was checked"
    return None
