"""The sandbox's seccomp program, read by a small interpreter of the four BPF instructions it
uses: on every machine it knows (not only this one), each ABI's keyring and namespace calls are
refused, a ``clone`` only with a namespace flag, ``clone3`` is absent, and the rest allowed."""

from __future__ import annotations

import errno
import struct

import pytest

from jianmu.execution._process import command_filter

ALLOW, EPERM, ENOSYS = 0x7FFF0000, 0x00050000 | errno.EPERM, 0x00050000 | errno.ENOSYS
X32 = 0x40000000
NEWUSER, NEWNET, NEWNS = 0x10000000, 0x40000000, 0x00020000
VM_FORK = 0x00000100 | 0x00004000 | 17  # CLONE_VM | CLONE_VFORK | SIGCHLD: posix_spawn's


def run(program: bytes, arch: int, nr: int, arg0: int = 0) -> int:
    """What ``program`` answers to system call ``nr`` of ``arch`` with first argument ``arg0``."""
    data = struct.pack("=iI", nr, arch) + b"\0" * 8 + struct.pack("=Q", arg0) + b"\0" * 40
    ops = [struct.unpack("=HBBI", program[i:i + 8]) for i in range(0, len(program), 8)]
    at, acc = 0, 0
    while True:
        code, jt, jf, k = ops[at]
        if code == 0x20:  # ld [k]
            acc = struct.unpack_from("=I", data, k)[0]
        elif code == 0x06:  # ret k
            return k
        elif code in (0x15, 0x45):  # jeq k, jset k
            hit = acc == k if code == 0x15 else bool(acc & k)
            at += jt if hit else jf
        else:
            raise AssertionError(f"an instruction the interpreter does not know: {code:#x}")
        at += 1


# per machine: (arch, keyring and namespace calls, clone, clone3, a plain call), per ABI
MACHINES = {
    "x86_64": [(0xC000003E, [248, 249, 250, 272, 308], 56, 435, 0),
               (0xC000003E, [X32 | n for n in (248, 249, 250, 272, 308)], X32 | 56,
                X32 | 435, X32 | 0),
               (0x40000003, [286, 287, 288, 310, 346], 120, 435, 3)],
    "aarch64": [(0xC00000B7, [217, 218, 219, 97, 268], 220, 435, 63),
                (0x40000028, [309, 310, 311, 337, 375], 120, 435, 3)],
    "riscv64": [(0xC00000F3, [217, 218, 219, 97, 268], 220, 435, 63)],
}


@pytest.mark.parametrize("machine", sorted(MACHINES))
def test_each_abi_refuses_the_keyring_and_new_namespaces(machine: str) -> None:
    program = command_filter(machine)
    assert program is not None
    for arch, refused, clone, clone3, plain in MACHINES[machine]:
        for nr in refused:
            assert run(program, arch, nr, NEWUSER) == EPERM, (machine, hex(arch), nr)
        for flag in (NEWUSER, NEWNET, NEWNS, NEWUSER | VM_FORK):
            assert run(program, arch, clone, flag) == EPERM, (machine, nr, hex(flag))
        assert run(program, arch, clone, VM_FORK) == ALLOW  # a thread, a child: as ever
        assert run(program, arch, clone3) == ENOSYS
        assert run(program, arch, plain) == ALLOW
    assert run(program, 0xDEADBEEF, 248) == ALLOW  # an ABI the machine does not run


def test_a_machine_whose_numbers_are_unknown_gets_no_filter() -> None:
    assert command_filter("mips") is None
