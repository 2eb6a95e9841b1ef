"""Writes never go through a link (tools/safe_write.py, used by `check --fix` and `plot --png`): links planted at
test time at the old temporary name, at the backup name, at the target itself; the target keeps its mode."""
from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

import pytest

from grpo_debug.server.cli import main
from grpo_debug.tools.safe_write import UnsafeWrite, read_regular, replace_file

DS_JSON = """{
  "train_micro_batch_size_per_gpu": 4,
  "gradient_accumulation_steps": 8,
  "gradient_clipping": 0.0,
  "bf16": {"enabled": true},
  "fp16": {"enabled": true, "loss_scale": 0}
}
"""
BASHRC = "# the user's shell start-up file\nexport PATH=$HOME/bin:$PATH\n"


def _mode(p: Path) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


@pytest.fixture
def planted(tmp_path):
    """ds.json (0644), a victim ~/.bashrc (0600) outside, and the links an attacker plants beside the target."""
    victim = tmp_path / "home" / ".bashrc"
    victim.parent.mkdir()
    victim.write_text(BASHRC)
    victim.chmod(0o600)
    runs = tmp_path / "runs"
    runs.mkdir()
    f = runs / "ds.json"
    f.write_text(DS_JSON)
    f.chmod(0o644)
    (runs / "ds.json.grpo-debug-tmp").symlink_to(victim)  # the old fixed temporary name
    (runs / "ds.json.orig").symlink_to(tmp_path / "home" / "created-by-the-fix")  # dangling
    return f, victim


def test_fix_never_writes_through_planted_links_and_keeps_the_mode(planted, capsys):
    f, victim = planted
    assert main(["check", str(f), "--fix"]) == 0
    out = capsys.readouterr().out
    assert victim.read_text() == BASHRC and _mode(victim) == 0o600  # untouched (was overwritten and made 0755)
    assert not (victim.parent / "created-by-the-fix").exists()  # the dangling .orig link was not followed
    assert os.path.islink(f.parent / "ds.json.orig") and os.path.islink(f.parent / "ds.json.grpo-debug-tmp")
    backup = f.parent / "ds.json.orig.1"
    assert backup.read_text() == DS_JSON and "ds.json.orig.1" in out and _mode(backup) == 0o644
    assert '"gradient_clipping": 1.0' in f.read_text() and _mode(f) == 0o644 and not f.is_symlink()
    left = sorted(p.name for p in f.parent.iterdir())
    assert left == ["ds.json", "ds.json.grpo-debug-tmp", "ds.json.orig", "ds.json.orig.1"]  # no temporary left


def test_fix_keeps_other_modes(tmp_path, capsys):
    f = tmp_path / "run.json"
    f.write_text(DS_JSON)
    f.chmod(0o600)
    assert main(["check", str(f), "--fix"]) == 0
    capsys.readouterr()
    assert _mode(f) == 0o600 and _mode(tmp_path / "run.json.orig") == 0o600


def test_fix_refuses_a_target_that_is_a_symlink(tmp_path, capsys):
    real = tmp_path / "outside.json"
    real.write_text(DS_JSON)
    link = tmp_path / "ds.json"
    link.symlink_to(real)
    assert main(["check", str(link), "--fix"]) == 2
    err = capsys.readouterr().err
    assert "symbolic link" in err and "real file" in err
    assert real.read_text() == DS_JSON and link.is_symlink() and not (tmp_path / "ds.json.orig").exists()


def test_a_planted_link_at_the_random_temporary_name_is_never_opened(tmp_path, monkeypatch):
    """Even a link at the exact temporary name (guessed or raced) fails the exclusive create."""
    import secrets

    victim = tmp_path / "victim"
    victim.write_text("keep")
    target = tmp_path / "x.png"
    monkeypatch.setattr(secrets, "token_hex", lambda n=8: "0" * (2 * n))
    (tmp_path / ".x.png.grpo-debug-0000000000000000.tmp").symlink_to(victim)
    with pytest.raises(FileExistsError):
        replace_file(target, b"new")
    assert victim.read_text() == "keep" and not target.exists()


def test_replace_creates_new_files_with_the_umask_and_replaces_regular_ones(tmp_path):
    new = tmp_path / "new.png"
    assert replace_file(new, b"a") is None
    umask = os.umask(0)
    os.umask(umask)
    assert new.read_bytes() == b"a" and _mode(new) == 0o666 & ~umask
    new.chmod(0o640)
    assert replace_file(new, b"b", backup=True) == str(tmp_path / "new.png.orig")
    assert new.read_bytes() == b"b" and _mode(new) == 0o640 and (tmp_path / "new.png.orig").read_bytes() == b"a"
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(UnsafeWrite, match="not a regular file"):
        replace_file(tmp_path / "fifo", b"x")


def test_read_regular_refuses_links_and_does_not_block_on_a_fifo(tmp_path):
    (tmp_path / "f").write_text("x")
    (tmp_path / "l").symlink_to(tmp_path / "f")
    os.mkfifo(tmp_path / "p")
    assert read_regular(tmp_path / "f") == b"x"
    with pytest.raises(UnsafeWrite, match="symbolic link"):
        read_regular(tmp_path / "l")
    done = threading.Event()
    errs: list[BaseException] = []

    def go():
        try:
            read_regular(tmp_path / "p")
        except BaseException as e:  # noqa: BLE001 - the test looks at it
            errs.append(e)
        done.set()

    threading.Thread(target=go, daemon=True).start()
    assert done.wait(5), "read_regular blocked on a FIFO"
    assert errs and isinstance(errs[0], UnsafeWrite)


def _metric_log(p: Path) -> Path:
    p.write_text("\n".join(f"step:{s} - actor/grad_norm:{1 + 0.01 * s:.3f} - actor/entropy:{1.2 - 0.01 * s:.3f}"
                           for s in range(1, 30)) + "\n")
    return p


def test_plot_png_refuses_an_existing_link_and_writes_via_rename(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    log = _metric_log(tmp_path / "run.log")
    victim = tmp_path / "victim.txt"
    victim.write_text(BASHRC)
    link = tmp_path / "out.png"
    link.symlink_to(victim)
    assert main(["plot", str(log), "--png", str(link)]) == 2
    assert "out.png is a symbolic link; refusing to write through it" in capsys.readouterr().err
    assert victim.read_text() == BASHRC and link.is_symlink()
    dangling = tmp_path / "dangling.png"
    dangling.symlink_to(tmp_path / "made-through-the-link.png")
    assert main(["plot", str(log), "--png", str(dangling)]) == 2
    assert not (tmp_path / "made-through-the-link.png").exists()
    good = tmp_path / "good.png"
    good.write_bytes(b"old")
    good.chmod(0o600)
    t0 = time.time()
    assert main(["plot", str(log), "--png", str(good)]) == 0
    capsys.readouterr()
    assert good.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and _mode(good) == 0o600 and time.time() - t0 < 60
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["run.log", "victim.txt", "out.png", "dangling.png",
                                                                 "good.png"])
