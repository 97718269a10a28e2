"""Docroots: exact sizes, the shared content rule (docs/formats.md test vector),
reuse of correct files, paths that cannot be files skipped and counted, built whole or
not at all, served byte-for-byte by a real server."""

import os
import shutil
import subprocess

import pandas as pd
import pytest

from sojourn.servers import Server, ServerConfig, free_port
from sojourn.workloads import docroot, models


def test_content_rule_test_vector():
    # docs/formats.md: path /a gives h mod 251 = 246, so the object starts f6 f7 f8 and byte 5 is 00.
    assert docroot.fnv1a64(b"") == 0xCBF29CE484222325
    assert docroot.fnv1a64(b"a") == 0xAF63DC4C8601EC8C  # FNV-1a 64 reference value for "a"
    assert docroot.phase("/a") == 246
    data = docroot.content("/a", 0, 6)
    assert data[:3] == bytes.fromhex("f6f7f8") and data[5] == 0


def test_content_offsets_agree_with_the_whole():
    whole = docroot.content("/o/17.bin", 0, 5000)
    assert docroot.content("/o/17.bin", 1234, 700) == whole[1234:1934]
    assert docroot.content("/o/17.bin", 4000, size=5000) == whole[4000:]
    expected = bytes((246 + i) % 251 for i in range(600))
    assert docroot.content("/a", 0, 600) == expected


def small_trace():
    return pd.DataFrame(
        {
            "arrival_s": [0.0, 0.1, 0.2, 0.3, 0.4, 0.5],
            "client": [0, 1, 2, 0, 1, 2],
            "path": ["/a", "/d/b.bin", "/a", "/d/", "/e%20f", "/big"],
            "size": [10, 300, 10, 40, 7, 3_000_000],
        }
    )


def test_materialize_writes_exact_files_and_reuses_them(tmp_path):
    stats = docroot.materialize(small_trace(), tmp_path)
    assert (stats.objects, stats.written, stats.reused) == (5, 5, 0)
    assert stats.bytes == 10 + 300 + 40 + 7 + 3_000_000
    assert stats.disk_bytes >= stats.bytes
    assert (tmp_path / "a").read_bytes() == docroot.content("/a", 0, 10)
    assert (tmp_path / "d" / "index.html").read_bytes() == docroot.content("/d/", 0, 40)
    assert (tmp_path / "e f").read_bytes() == docroot.content("/e%20f", 0, 7)
    assert (tmp_path / "big").read_bytes() == docroot.content("/big", 0, 3_000_000)

    again = docroot.materialize(small_trace(), tmp_path)
    assert (again.written, again.reused) == (0, 5)

    # A wrong file (right size, wrong bytes; or wrong size) is rewritten.
    (tmp_path / "a").write_bytes(b"x" * 10)
    with open(tmp_path / "big", "r+b") as handle:
        handle.truncate(100)
    third = docroot.materialize(small_trace(), tmp_path)
    assert (third.written, third.reused) == (2, 3)
    assert (tmp_path / "a").read_bytes() == docroot.content("/a", 0, 10)
    assert (tmp_path / "big").stat().st_size == 3_000_000
    assert not list(tmp_path.rglob("*.partial"))


def test_several_sizes_for_one_path_keep_the_largest(tmp_path):
    trace = small_trace()
    trace.loc[2, "size"] = 25
    stats = docroot.materialize(trace, tmp_path)
    assert stats.size_conflicts == 1
    assert (tmp_path / "a").stat().st_size == 25


def trace_of(paths):
    return pd.DataFrame({"arrival_s": [0.1 * i for i in range(len(paths))], "client": [0] * len(paths),
                         "path": paths, "size": [5] * len(paths)})


def test_paths_that_cannot_be_files_are_skipped_and_counted(tmp_path):
    root = tmp_path / "root"
    stats = docroot.materialize(trace_of([
        "/d/../../etc/x",          # would leave the docroot
        "/a%00b",                  # NUL byte
        "/" + "n" * 300,           # name longer than the file system holds
        "/f", "/f/g",              # /f is a file, so /f/g cannot be
        "/i/", "/i/index.html",    # two paths, one file
        "/x//y", "/%C3%A9t%C3%A9", "/raw%FF",  # mapped: // merged, UTF-8 and raw bytes decoded
    ]), root)
    assert stats.objects == 10 and stats.written == 5
    assert stats.skipped == {
        "has a '.' or '..' segment (it would leave the docroot)": 1, "holds a NUL byte (%00)": 1,
        "has a segment longer than 255 bytes": 1, "a file where a directory is needed": 1,
        "the same file as '/i/'": 1,
    }
    assert "skipped 1: holds a NUL byte (%00)" in stats.summary()
    assert (root / "x" / "y").read_bytes() == docroot.content("/x//y", 0, 5)
    assert (root / "été").is_file() and (root / os.fsdecode(b"raw\xff")).is_file()
    assert (root / "i" / "index.html").read_bytes() == docroot.content("/i/", 0, 5)
    assert not (tmp_path / "etc").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["root"]


def test_an_interrupted_build_leaves_nothing_behind(tmp_path, monkeypatch):
    root = tmp_path / "root"
    writes = []
    real_write = docroot._write

    def interrupted(file, path, size):
        if len(writes) == 2:
            raise KeyboardInterrupt  # Ctrl-C half-way through
        writes.append(path)
        real_write(file, path, size)

    monkeypatch.setattr(docroot, "_write", interrupted)
    with pytest.raises(KeyboardInterrupt):
        docroot.materialize(small_trace(), root)
    assert list(tmp_path.iterdir()) == []  # no root, no half-built directory

    # Over a previous docroot, a failure leaves the previous one whole and untouched.
    monkeypatch.setattr(docroot, "_write", real_write)
    docroot.materialize(small_trace(), root)
    before = {p.relative_to(root): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    bigger = small_trace()
    bigger.loc[0, "size"] = 11
    writes.clear()
    monkeypatch.setattr(docroot, "_write", lambda *a: (_ for _ in ()).throw(OSError(28, "No space left on device")))
    with pytest.raises(OSError, match="No space left"):
        docroot.materialize(bigger, root)
    assert {p.relative_to(root): p.read_bytes() for p in root.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["root"]


def test_a_directory_not_made_here_is_not_replaced(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="was not made by `sojourn trace docroot`"):
        docroot.materialize(small_trace(), tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_a_generated_trace_materializes_every_object(tmp_path):
    trace = models.make_trace(models.specweb99(data_set_bytes=2e7), n_requests=2000, rate=100, seed=1)
    stats = docroot.materialize(trace, tmp_path)
    assert stats.objects == trace["path"].nunique()
    for path, size in trace.drop_duplicates("path")[["path", "size"]].itertuples(index=False):
        assert (tmp_path / path.lstrip("/")).stat().st_size == size


@pytest.mark.skipif(shutil.which("nginx") is None or shutil.which("curl") is None, reason="nginx and curl are needed")
def test_nginx_serves_the_docroot_byte_for_byte(tmp_path):
    trace = models.make_trace("wc98", n_requests=300, rate=100, seed=5, n_objects=50)
    root = tmp_path / "root"
    docroot.materialize(trace, root)
    port = free_port()
    with Server(ServerConfig(kind="nginx", root=root, port=port)):
        objects = trace.drop_duplicates("path").head(20)
        for path, size in objects[["path", "size"]].itertuples(index=False):
            body = subprocess.run(["curl", "-sf", f"http://127.0.0.1:{port}{path}"], capture_output=True, check=True).stdout
            assert body == docroot.content(path, 0, int(size))
