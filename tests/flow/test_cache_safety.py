"""The cross-run cache cannot go stale and cannot be made to run code.

The holes (issue 18): a folder input holding a dangling symbolic link was
fingerprinted as "missing" (every later edit served the first result); an
edit that restored size and modification time was not seen; a symbolic link
loop crashed ``--cache`` runs; entries were unpickled unchecked, so a file
planted in the cache folder ran code.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import stat
from pathlib import Path

import pytest

import perflow
from perflow.cli.main import main
from perflow.errors import CacheError, FormatError
from perflow.flow import fingerprint as fpmod
from perflow.flow.cache import Cache
from perflow.flow.fingerprint import fingerprint, path_digest

CALLS: list[str] = []
CAT_YAML = """perflow: 1
name: cat
inputs: {d: {type: path}}
steps:
  cat: {pass: t_catdir, inputs: {d: input:d}}
outputs: {text: cat}
"""


@perflow.pass_(name="t_catdir", version="1")
def catdir(d: Path) -> str:
    """The contents of the regular files under ``d`` (links followed), by name."""
    CALLS.append(str(d))
    out = []
    for root, dirs, files in os.walk(d, followlinks=False):
        dirs.sort()
        for f in sorted(files):
            p = os.path.join(root, f)
            if os.path.isfile(p):
                out.append(f"{os.path.relpath(p, d)}={Path(p).read_text()}")
    return ";".join(out)


def flow() -> perflow.Flow:
    f = perflow.Flow("cat")
    f.output("text", f.step("cat", "t_catdir", f.input("d", Path)))
    return f


def run(d: Path, cache: Path) -> tuple[str, str]:
    r = perflow.run(flow(), d=d, cache=cache)
    r.raise_for_status()
    return r["text"], dict(r.steps["status"])["cat"]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    d = tmp_path / "run"
    d.mkdir()
    (d / "a.txt").write_text("1")
    return d


def test_a_dangling_link_does_not_hide_edits(folder: Path, tmp_path: Path) -> None:
    (folder / "latest").symlink_to(folder / "nowhere")
    (folder / "z.txt").write_text("1")  # listed after the link (the old walk stopped at the link)
    assert run(folder, tmp_path / "c") == ("a.txt=1;z.txt=1", "done")
    assert run(folder, tmp_path / "c") == ("a.txt=1;z.txt=1", "cached")
    (folder / "z.txt").write_text("2")
    assert run(folder, tmp_path / "c") == ("a.txt=1;z.txt=2", "done")
    # the link's target appearing (or changing) changes the fingerprint too
    (folder / "nowhere").write_text("3")
    assert run(folder, tmp_path / "c") == ("a.txt=1;latest=3;nowhere=3;z.txt=2", "done")
    (folder / "latest").unlink()
    (folder / "latest").symlink_to(folder / "elsewhere")
    fp = fingerprint(folder)
    (folder / "latest").unlink()
    (folder / "latest").symlink_to(folder / "elsewhere2")
    assert fingerprint(folder) != fp


def test_an_edit_restoring_size_and_mtime_is_seen(folder: Path, tmp_path: Path) -> None:
    st = (folder / "a.txt").stat()
    assert run(folder, tmp_path / "c") == ("a.txt=1", "done")
    (folder / "a.txt").write_text("9")
    os.utime(folder / "a.txt", ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (folder / "a.txt").stat().st_mtime_ns == st.st_mtime_ns
    assert run(folder, tmp_path / "c") == ("a.txt=9", "done")
    # touching without an edit keeps the result
    os.utime(folder / "a.txt")
    assert run(folder, tmp_path / "c") == ("a.txt=9", "cached")


def test_links_are_followed_to_their_content(folder: Path, tmp_path: Path) -> None:
    ext = tmp_path / "ext"
    ext.mkdir()
    (ext / "b.txt").write_text("x")
    (folder / "sub").symlink_to(ext, target_is_directory=True)
    (folder / "c.txt").symlink_to(ext / "b.txt")
    assert run(folder, tmp_path / "c") == ("a.txt=1;c.txt=x", "done")
    fp = fingerprint(folder)
    (ext / "b.txt").write_text("y")
    assert fingerprint(folder) != fp
    assert run(folder, tmp_path / "c")[1] == "done"


@pytest.mark.parametrize("kind", ["file loop", "folder loop"])
def test_a_link_loop_is_a_clear_error(folder: Path, tmp_path: Path, kind: str, capsys) -> None:
    if kind == "file loop":
        (folder / "x").symlink_to(folder / "y")
        (folder / "y").symlink_to(folder / "x")
    else:
        (folder / "sub").mkdir()
        (folder / "sub" / "up").symlink_to(folder, target_is_directory=True)
    with pytest.raises(FormatError, match=r"symbolic link loop at .* remove the loop or run without a cache"):
        path_digest(folder)
    with pytest.raises(FormatError, match="symbolic link loop"):
        perflow.run(flow(), d=folder, cache=tmp_path / "c")
    (tmp_path / "cat.yaml").write_text(CAT_YAML)
    code = main(["run", str(tmp_path / "cat.yaml"), "-i", str(folder), "--cache", str(tmp_path / "c")])
    err = capsys.readouterr().err
    assert code == 2 and "symbolic link loop" in err and "Traceback" not in err
    assert perflow.run(flow(), d=folder).ok  # without a cache nothing needs the fingerprint


def test_special_files_are_not_read(folder: Path) -> None:
    os.mkfifo(folder / "pipe")  # reading it would block forever
    fp = path_digest(folder)
    (folder / "a.txt").write_text("2")
    assert path_digest(folder) != fp


def test_unchanged_inputs_are_not_read_again(folder: Path, tmp_path: Path, monkeypatch) -> None:
    reads: list[str] = []
    real = fpmod.file_digest

    def counting(path):
        reads.append(str(path))
        return real(path)

    monkeypatch.setattr(fpmod, "file_digest", counting)
    (folder / "b.txt").write_text("22")
    run(folder, tmp_path / "c")
    assert len(reads) == 2
    fpmod._MEMO.clear()  # a new process: only the cache's store remembers
    reads.clear()
    assert run(folder, tmp_path / "c")[1] == "cached" and reads == []
    os.utime(folder / "b.txt")  # a new change time: read again (one file only)
    fpmod._MEMO.clear()
    assert run(folder, tmp_path / "c")[1] == "cached" and reads == [str(folder / "b.txt")]
    # a forged store is ignored (its MAC does not match): everything is read
    for f in (tmp_path / "c" / "v2" / "files").iterdir():
        doc = json.loads(f.read_text())
        doc["body"]["hashes"] = {k: "0" * 40 for k in doc["body"]["hashes"]}
        f.write_text(json.dumps(doc))
    fpmod._MEMO.clear()
    reads.clear()
    assert run(folder, tmp_path / "c") == ("a.txt=1;b.txt=22", "cached") and len(reads) == 2


class Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({str(self.marker)!r}, 'w').write('pwned')",))


def test_a_planted_entry_does_not_run_code(folder: Path, tmp_path: Path) -> None:
    cache = tmp_path / "c"
    assert run(folder, cache)[1] == "done"
    (meta,) = (cache / "v2").glob("*/*/meta.json")
    doc = json.loads(meta.read_text())
    marker = tmp_path / "marker"
    data = pickle.dumps(Payload(marker))
    (meta.parent / "0.pkl").write_bytes(data)
    # the attacker can describe the file correctly but cannot sign without the key
    (out,) = doc["body"]["outputs"].values()
    out["digest"] = hashlib.blake2b(data, digest_size=32).hexdigest()
    doc["mac"] = hashlib.blake2b(json.dumps(doc["body"]).encode(), key=b"k" * 32, digest_size=32).hexdigest()
    meta.write_text(json.dumps(doc))
    CALLS.clear()
    assert run(folder, cache) == ("a.txt=1", "done")  # the planted entry is a miss
    assert not marker.exists() and CALLS
    assert run(folder, cache)[1] == "cached"
    # a signed entry whose file was swapped afterwards is not unpickled either
    (meta,) = (cache / "v2").glob("*/*/meta.json")
    (meta.parent / "0.pkl").write_bytes(data)
    r = perflow.run(flow(), d=folder, cache=cache)
    assert not marker.exists() and r.ok and dict(r.steps["status"])["cat"] == "done"  # dropped when planned, recomputed


def test_the_key_file_must_be_private_and_ours(tmp_path: Path) -> None:
    c = Cache(tmp_path / "c")
    key = c.path / "key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and len(key.read_bytes()) == 32
    assert Cache(tmp_path / "c")._key == c._key  # created once, then reused
    os.chmod(key, 0o644)
    with pytest.raises(CacheError, match=r"readable or writable by others \(mode 644\)"):
        Cache(tmp_path / "c")
    os.chmod(key, 0o600)
    if os.geteuid() == 0:
        os.chown(key, 12345, 12345)
        with pytest.raises(CacheError, match="belongs to user 12345, not you"):
            Cache(tmp_path / "c")
        os.chown(key, 0, 0)
    other = tmp_path / "theirs"
    other.write_bytes(b"k" * 32)
    os.chmod(other, 0o600)
    key.unlink()
    key.symlink_to(other)
    with pytest.raises(CacheError, match="is a symbolic link"):
        Cache(tmp_path / "c")
    key.unlink()
    key.write_bytes(b"short")
    os.chmod(key, 0o600)
    with pytest.raises(CacheError, match="damaged"):
        Cache(tmp_path / "c")


def test_a_bad_key_is_a_usage_error_in_the_cli(tmp_path: Path, folder: Path, capsys) -> None:
    Cache(tmp_path / "c")
    os.chmod(tmp_path / "c" / "key", 0o666)
    (tmp_path / "cat.yaml").write_text(CAT_YAML)
    code = main(["run", str(tmp_path / "cat.yaml"), "-i", str(folder), "--cache", str(tmp_path / "c")])
    err = capsys.readouterr().err
    assert code == 2 and "refusing to trust this cache" in err
