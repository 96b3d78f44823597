import pytest

from synth._io import atomic_write


def test_atomic_write_replaces_only_on_success(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_write(path) as handle:
            handle.write("half")
            raise RuntimeError("boom")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]
    with atomic_write(path) as handle:
        handle.write("new")
    assert path.read_text() == "new"


def test_atomic_write_leaves_nothing_when_target_is_new(tmp_path):
    with pytest.raises(KeyError):
        with atomic_write(tmp_path / "x.csv") as handle:
            handle.write("partial")
            raise KeyError("x")
    assert list(tmp_path.iterdir()) == []


def test_atomic_write_into_a_missing_folder_names_the_target(tmp_path):
    target = tmp_path / "nope" / "out.csv"
    with pytest.raises(FileNotFoundError) as info:
        with atomic_write(target):
            pass
    assert info.value.filename == str(target)


def test_atomic_write_gives_the_usual_file_mode(tmp_path):
    import os

    old = os.umask(0o022)
    try:
        with atomic_write(tmp_path / "out.txt") as handle:
            handle.write("x")
    finally:
        os.umask(old)
    assert (tmp_path / "out.txt").stat().st_mode & 0o777 == 0o644
