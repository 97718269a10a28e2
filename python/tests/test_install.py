"""`pip install .` of the Python package in a fresh venv gives both commands: the wheel
(maturin, bindings = "bin") ships the sojourn-engine binary. The release build reuses the
checkout's target/ directory, so after `make build` it is incremental (seconds)."""

from __future__ import annotations

import os
import subprocess
import venv

import pytest

from sojourn.engine import REPO


@pytest.mark.slow
def test_pip_install_ships_the_engine(tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    pip = env_dir / "bin" / "pip"
    env = {**os.environ, "CARGO_TARGET_DIR": str(REPO / "target")}
    # --no-deps: the runtime dependencies are the checkout's venv's business; this is about the wheel.
    build = subprocess.run([str(pip), "install", "-q", "--no-deps", str(REPO / "python")], env=env,
                           capture_output=True, text=True, timeout=900)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    engine = subprocess.run([str(env_dir / "bin" / "sojourn-engine"), "--help"], capture_output=True, text=True, timeout=60)
    assert engine.returncode == 0 and "Usage: sojourn-engine" in engine.stdout, engine.stderr
    script = (env_dir / "bin" / "sojourn").read_text()
    assert script.startswith(f"#!{env_dir}/bin/python") and "sojourn.cli" in script
    # The installed package finds its own engine (not a cargo build) when run outside a checkout.
    site = subprocess.run([str(env_dir / "bin" / "python"), "-c", "import sojourn, pathlib; print(pathlib.Path(sojourn.__file__).parent)"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert site.stdout.strip().startswith(str(env_dir)), site.stdout + site.stderr


def test_an_engine_older_than_a_source_is_not_run(monkeypatch):
    """A result records the checkout it came from (versions.json), so a binary built
    before a source changed is rebuilt, or refused where nothing may build."""
    from sojourn import engine

    assert engine.newer_source(float("inf")) is None
    assert engine.newer_source(0.0) is not None  # every source is newer than 1970
    changed = REPO / "crates" / "server" / "src" / "lib.rs"
    monkeypatch.setattr(engine, "newer_source", lambda built, binary=None: changed)
    monkeypatch.delenv("SOJOURN_ENGINE", raising=False)
    with pytest.raises(FileNotFoundError, match=r"is older than crates/server/src/lib.rs: run `make build`"):
        engine.engine_path(build=False)


def test_the_sources_of_the_engine_are_the_ones_cargo_compiled_into_it(tmp_path):
    """cargo's dep-info file (<binary>.d) names what the binary was built from: a test of a
    crate changed after the build does not make the binary stale (cargo would not relink it,
    so it would stay stale for ever), a source it lists does."""
    import os

    from sojourn import engine

    source, test = tmp_path / "lib.rs", tmp_path / "a test.rs"
    for path in (source, test):
        path.write_text("// x\n")
    binary = tmp_path / "sojourn-engine"
    binary.write_text("")
    binary.with_name("sojourn-engine.d").write_text(f"{binary}: {source} \\\n {str(test).replace(' ', chr(92) + ' ')}\n")
    os.utime(binary, (1000, 1000))
    for path in (source, test):
        os.utime(path, (500, 500))
    assert engine.newer_source(1000, binary) is None
    os.utime(test, (2000, 2000))
    assert engine.newer_source(1000, binary) == test  # listed, with its escaped space
    os.utime(test, (500, 500))
    (tmp_path / "unlisted.rs").write_text("")
    assert engine.newer_source(1000, binary) is None  # not compiled into the binary
