"""``python -m chaos run`` refuses an --out it cannot create with one line, before any process starts."""

from __future__ import annotations

from chaos.__main__ import main


def test_an_out_dir_under_a_file_is_one_line(tmp_path, capsys):
    (tmp_path / "a-file").write_text("")
    out = tmp_path / "a-file" / "runs"
    assert main(["run", "subscriber-killed", "--quick", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert f"cannot create --out directory {out}: Not a directory" in err
