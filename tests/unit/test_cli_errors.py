"""The one line a command prints for an operating-system error the user caused: the path, why, what to do."""

from __future__ import annotations

import errno
import os

import pytest

from aeron_numba.cli import fail, user_error_line


@pytest.mark.parametrize("code, advice", [
    (errno.ENOENT, "a parent directory is missing"),
    (errno.ENOTDIR, "a part of the path is a file"),
    (errno.EACCES, "choose a directory you can write"),
    (errno.EROFS, "the file system is read-only"),
    (errno.ENOSPC, "free some space"),
    (errno.EFBIG, "ulimit -f"),
])
def test_each_cause_a_user_can_fix_names_the_path_and_what_to_do(code, advice):
    exc = OSError(code, os.strerror(code), "/some/dir")
    line = user_error_line(exc, "aeron dir")
    assert line.startswith(f"cannot create aeron dir /some/dir: {os.strerror(code)}; ")
    assert advice in line and "\n" not in line


def test_a_real_error_from_the_os_and_one_already_worded_keep_their_text(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(OSError) as info:
        (tmp_path / "f" / "d").mkdir(parents=True)
    assert user_error_line(info.value, "--out directory") == (
        f"cannot create --out directory {tmp_path / 'f' / 'd'}: Not a directory; a part of the path is a file, "
        "not a directory: choose another path")
    worded = OSError(errno.ENOSPC, "cannot create /x/cnc.dat of length=4096: No space left on device")
    assert user_error_line(worded, "aeron dir").startswith("cannot create /x/cnc.dat of length=4096: No space")


def test_fail_prints_prog_and_message_to_stderr_and_returns_the_code(capsys):
    assert fail("prog", "bad --x=3", 2) == 2
    assert capsys.readouterr().err == "prog: bad --x=3\n"
