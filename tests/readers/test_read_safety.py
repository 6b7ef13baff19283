"""The holes the reader fuzzing campaign found (issue 18), each reproduced and shown closed.

Inputs that used to exhaust memory are read in a forked child with a capped
address space (:func:`tests.fuzz.harness.read_capped`), so a regression fails
the test instead of the machine.
"""

from __future__ import annotations

import gzip
import json
import marshal
import random
import shutil
import struct
from pathlib import Path

import pytest

import perflow
from perflow.errors import FormatError
from tests.conftest import REPO, shared
from tests.fuzz import mutators as M
from tests.fuzz.harness import Sample, read_capped


def _copy(src: Path, dst: Path) -> Path:
    if src.is_dir():
        shutil.copytree(src, dst)
        for p in dst.rglob("*"):
            p.chmod(0o644 if p.is_file() else 0o755)
    else:
        shutil.copyfile(src, dst)
        dst.chmod(0o644)
    return dst


def _capped(path: Path, fmt: str, root: Path, **options: object) -> tuple[str, str]:
    return read_capped(Sample(root, path, [path]), fmt, dict(options), timeout=60)


# ------------------------------------------------------------------------------- 3. bounded memory on any input
def test_pstats_huge_tuple_count_is_refused_before_allocating(tmp_path: Path) -> None:
    # the 1 KB shared sample with one small tuple turned into a tuple of 2**31-1 elements: marshal.loads took 16 GB+
    data = bytearray(shared("cprofile", "cprofile-cycle.pstats").read_bytes())
    k = data.index(0x29, 2)  # the first small tuple after the dict and its first key's type code
    data[k : k + 2] = b"(" + struct.pack("<i", 0x7FFFFFFF)
    f = tmp_path / "damaged.pstats"
    f.write_bytes(bytes(data))
    assert len(data) < 1100
    outcome, detail = _capped(f, "cprofile", tmp_path)
    assert outcome == "format_error", detail
    assert f"(byte {k}): damaged marshal data: tuple announces 2147483647 items" in detail


def test_pstats_decoder_agrees_with_marshal() -> None:
    from perflow.readers import _marshal

    for obj in [
        {("a.py", 1, "f"): (1, 2, 0.5, 1.5, {("b.py", 3, "g"): (1, 1, 0.1, 0.2)})},
        [None, True, False, 2**80, -(2**70), 1.25, 1j, "é", b"x", (), frozenset({1}), {2, 3}, ...],
    ]:
        assert _marshal.loads(marshal.dumps(obj)) == obj
    with pytest.raises(FormatError, match=r"bytes after the end"):
        _marshal.loads(marshal.dumps(1) + b"x")
    with pytest.raises(FormatError, match=r"nested deeper than 100 levels"):
        _marshal.loads(b")\x01" * 200 + b"N")


def test_gzip_chrome_bomb_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "trace.json.gz"
    f.write_bytes(gzip.compress(b"[", mtime=0) + M.gzip_bomb())  # 2 MB that inflate to 1 GiB
    outcome, detail = _capped(f, "chrome", tmp_path)
    assert outcome == "format_error", detail
    assert "trace.json.gz: inflates to more than" in detail and "refused as a compression bomb" in detail


def test_inflate_limit_is_configurable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (REPO / "tests/data/chrome/viztracer.json").read_bytes()
    f = tmp_path / "viztracer.json.gz"
    f.write_bytes(gzip.compress(text))
    assert perflow.read(f).n_vertices > 0
    monkeypatch.setenv("PERFLOW_INFLATE_FLOOR_MB", "0.0001")
    monkeypatch.setenv("PERFLOW_INFLATE_RATIO", "1.5")
    with pytest.raises(FormatError, match=r"refused as a compression bomb \(raise PERFLOW_INFLATE_RATIO"):
        perflow.read(f)
    monkeypatch.setenv("PERFLOW_INFLATE_RATIO", "100")
    assert perflow.read(f).n_vertices > 0


def test_inflate_streams_every_kind(tmp_path: Path) -> None:
    import bz2
    import lzma
    import zlib

    from perflow._inflate import inflate

    data = bytes(range(256)) * 1000
    packed = {
        "gzip": gzip.compress(data[:1000]) + gzip.compress(data[1000:]),  # two members are one file
        "zlib": zlib.compress(data),
        "bz2": bz2.compress(data),
        "xz": lzma.compress(data),
    }
    for kind, z in packed.items():
        assert inflate(z, kind, "x") == data
        with pytest.raises(FormatError, match=r"x: corrupt or truncated"):
            inflate(z[: len(z) // 2], kind, "x")
        with pytest.raises(FormatError, match=r"inflates to more than the 1000 bytes expected"):
            inflate(z, kind, "x", expected=1000)


def _cube_sample(tmp_path: Path) -> Sample:
    f = _copy(shared("cube", "scorep-cpi", "profile.cubex"), tmp_path / "profile.cubex")
    return Sample(tmp_path, f, [f])


def test_cube_zlib_member_bomb_is_refused(tmp_path: Path) -> None:
    s = _cube_sample(tmp_path)
    M.cube_zbomb(s, random.Random(1))
    outcome, detail = _capped(s.read_path, "cube", tmp_path)
    assert outcome == "format_error", detail
    assert "segment 0: inflates to more than" in detail and "cnodes x 4 locations hold (damaged data)" in detail


def test_cube_compressed_archive_bomb_is_refused(tmp_path: Path) -> None:
    s = _cube_sample(tmp_path)
    M.cube_tar_bomb(s, random.Random(1))
    outcome, detail = _capped(s.read_path, "cube", tmp_path)
    assert outcome == "format_error", detail
    assert "member 0.data announces 1073741824 bytes, more than the archive can hold" in detail


def test_recording_npz_bomb_and_huge_shape(tmp_path: Path) -> None:
    from tests.fuzz.targets import _build_recording

    s = _build_recording(tmp_path / "a")
    M.npz_bomb(s, random.Random(2))
    outcome, detail = _capped(s.read_path, "recording", tmp_path)
    assert outcome == "format_error" and "refused as a compression bomb" in detail, detail
    s = _build_recording(tmp_path / "b")
    M.npy_huge_shape(s, random.Random(3))
    with pytest.raises(
        FormatError, match=r"rawtrace\.npz \(.*\.npy\): not a saved perflow raw trace: member .* announces"
    ):
        perflow.read(s.read_path)


# ------------------------------------------------------------------------------------------ parent-pointer cycles
_CALI_HEAD = (
    "__rec=node,id=12,attr=10,data=268,parent=3\n"
    "__rec=node,id=13,attr=8,data=region,parent=12\n"
    "__rec=node,id=14,attr=10,data=21,parent=5\n"
    "__rec=node,id=15,attr=8,data=sum#time.duration,parent=14\n"
)


@pytest.mark.parametrize(
    "body,message",
    [
        (  # a parent cycle (20 -> 21 -> 20): it used to build a 100,000-deep call path
            "__rec=node,id=20,attr=13,data=a,parent=21\n__rec=node,id=21,attr=13,data=b,parent=20\n",
            r"\(line 5\): node 20: its parent 21 is not defined before it",
        ),
        ("__rec=node,id=20,attr=13,data=a,parent=20\n", r"\(line 5\): node 20: its parent 20 is not defined before it"),
        (
            "__rec=node,id=20,attr=13,data=a\n__rec=node,id=20,attr=13,data=b\n",
            r"\(line 6\): node 20 is defined twice, differently",
        ),
        (
            "__rec=node,id=20,attr=13,data=a\n__rec=ctx,ref=20,attr=15,data=1.0\n__rec=ctx,ref=20,attr=15,da",
            r"\(line 7\): truncated",
        ),
        (
            "__rec=node,id=20,attr=13,data=a\n__rec=ctx,ref=99,attr=15,data=1.0\n",
            r"\(line 6\): reference to undefined node 99",
        ),
        ("__rec=node,id=20,attr=13,data=a\n__rec=ctx,ref=20,attr=15,data=x1\n", r"\(line 6\): value 'x1' of attribute"),
    ],
)
def test_cali_damage(tmp_path: Path, body: str, message: str) -> None:
    f = tmp_path / "a.cali"
    f.write_text(_CALI_HEAD + body + ("\n__rec=ctx,ref=20,attr=15,data=1.0\n" if "ctx" not in body else ""))
    if "truncated" in message:
        f.write_text(_CALI_HEAD + body)
    with pytest.raises(FormatError, match=r"a\.cali " + message):
        perflow.read(f)


def test_cali_cycle_in_real_sample(tmp_path: Path) -> None:
    f = _copy(shared("caliper", "lulesh-cali", "lulesh-annotation-profile.cali"), tmp_path / "l.cali")
    s = Sample(tmp_path, f, [f])
    what = M.cali_cycle(s, random.Random(5))
    outcome, detail = _capped(f, "caliper", tmp_path)
    assert outcome == "format_error" and "is not defined before it" in detail, (what, detail)


def test_caliper_json_damage(tmp_path: Path) -> None:
    src = json.loads(shared("caliper", "cpi-json", "cpi-callpath-profile.json").read_text())
    f = tmp_path / "c.json"
    doc = json.loads(json.dumps(src))
    doc["nodes"][1]["parent"] = 2  # node 2's parent is 1: 1 -> 2 -> 1
    f.write_text(json.dumps(doc))
    with pytest.raises(FormatError, match=r"c\.json \(nodes\[\d\]\): node \d \('[^']+'\) is its own ancestor"):
        perflow.read(f)
    doc = json.loads(json.dumps(src))
    doc["nodes"][3]["parent"] = "x"
    f.write_text(json.dumps(doc))
    with pytest.raises(FormatError, match=r"\(nodes\[3\]\): node 3 has the parent 'x', not a node index"):
        perflow.read(f)
    doc = json.loads(json.dumps(src))
    doc["data"][0][2] = -1  # mpi.rank: was a PAGError from deep inside the PAG constructor
    f.write_text(json.dumps(doc))
    with pytest.raises(FormatError, match=r"c\.json \(data\[0\]\): mpi\.rank is -1, not a rank or thread number"):
        perflow.read(f)
    doc = json.loads(json.dumps(src))
    doc["column_metadata"] = doc["column_metadata"][:2]
    f.write_text(json.dumps(doc))
    with pytest.raises(FormatError, match=r"'column_metadata' does not describe the 6 columns"):
        perflow.read(f)


def test_hpctoolkit_v4_context_id_cycle(tmp_path: Path) -> None:
    d = _copy(shared("hpctoolkit", "ping-pong-v4"), tmp_path / "db")
    s = Sample(tmp_path, d, [d / "meta.db"])
    M.v4_ctx_cycle(s, random.Random(3))
    outcome, detail = _capped(d, "hpctoolkit", tmp_path)
    assert outcome == "format_error" and "meta.db" in detail and "appears twice" in detail, detail


# --------------------------------------------------------------------------- 4. integrity as strict as the tools
def test_hpctoolkit_classic_metric_db_must_have_its_exact_size(tmp_path: Path) -> None:
    d = _copy(shared("hpctoolkit", "cpi-xml"), tmp_path / "db")
    f = sorted(d.glob("*.metric-db"))[1]
    f.write_bytes(f.read_bytes() + bytes(8))
    with pytest.raises(FormatError, match=r"metric-db \(offset 992\): 8 bytes after the 60 nodes x 2 metrics"):
        perflow.read(d)


def test_hpctoolkit_v4_truncation_and_index_order(tmp_path: Path) -> None:
    d = _copy(shared("hpctoolkit", "ping-pong-v4"), tmp_path / "db")
    prof = (d / "profile.db").read_bytes()
    (d / "profile.db").write_bytes(prof[:-100])
    with pytest.raises(FormatError, match=r"profile\.db.*does not end with its footer '_prof\.db'"):
        perflow.read(d, mode="profile")
    # swap two context-index entries of the first profile: the index is no longer sorted
    from perflow.readers.hpctoolkit.v4meta import Blob

    b = Blob(d / "meta.db", b"meta")  # any v4 file: the accessors only
    (d / "profile.db").write_bytes(prof)
    b = Blob(d / "profile.db", b"prof")
    _sz, p_info = b.section(0)
    pi = b.u64(p_info)
    p_idx = b.u64(pi + 0x18)
    data = bytearray(prof)
    data[p_idx : p_idx + 12], data[p_idx + 12 : p_idx + 24] = prof[p_idx + 12 : p_idx + 24], prof[p_idx : p_idx + 12]
    (d / "profile.db").write_bytes(bytes(data))
    with pytest.raises(FormatError, match=r"profile 0: its context index is not sorted by context"):
        perflow.read(d, mode="profile")


def test_tau_more_timers_than_its_header(tmp_path: Path) -> None:
    d = _copy(shared("tau", "cpi-mpi"), tmp_path / "tau")
    f = d / "profile.2.0.0"
    lines = f.read_text().splitlines(keepends=True)
    lines.insert(25, '"extra()" 1 0 5 5 0 GROUP="TAU_USER"\n')
    f.write_text("".join(lines))
    with pytest.raises(FormatError, match=r"profile\.2\.0\.0 \(line 26\): damaged: one more timer line than the 23"):
        perflow.read(d)
    lines = _copy(shared("tau", "cpi-mpi", "profile.2.0.0"), tmp_path / "x").read_text().splitlines(keepends=True)
    f.write_text("".join(lines[:-1]))  # one of the 2 user events cut off
    with pytest.raises(FormatError, match=r"truncated: 2 user events announced, the file has 1"):
        perflow.read(d)


# ------------------------------------------------------------------------------- 7. every bad input: FormatError
def _pstats(tmp_path: Path, change) -> Path:  # type: ignore[no-untyped-def]
    stats = marshal.loads(shared("cprofile", "cprofile-cycle.pstats").read_bytes())
    change(stats)
    f = tmp_path / "s.pstats"
    f.write_bytes(marshal.dumps(stats))
    return f


def _first(stats: dict) -> tuple:
    return next(k for k, v in stats.items() if v[4])


@pytest.mark.parametrize(
    "change,message",
    [
        (lambda s: s.__setitem__(_first(s), (*s[_first(s)][:4], "x")), r"bad statistics"),
        (lambda s: s.__setitem__(_first(s), (1, 1, float("nan"), 1.0, {})), r"bad statistics \(1, 1, nan"),
        (lambda s: s[_first(s)][4].__setitem__(next(iter(s[_first(s)][4])), {1: 2}), r"bad caller statistics \{1: 2\}"),
        (lambda s: s.__setitem__(("a", "b", "c"), s.pop(_first(s))), r"unexpected function key \('a', 'b', 'c'\)"),
    ],
)
def test_pstats_bad_values(tmp_path: Path, change, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(FormatError, match=r"s\.pstats: .*" + message):
        perflow.read(_pstats(tmp_path, change))


def test_chrome_deep_nesting_is_an_error_not_a_crash(tmp_path: Path) -> None:
    f = tmp_path / "deep.json"
    n = 100_000
    f.write_text('[{"ph": "X", "name": "a", "args": ' + '{"a":' * n + "1" + "}" * n + "}]")
    outcome, detail = _capped(f, "chrome", tmp_path)  # orjson before 3.9.15 overflowed the C stack here
    assert outcome == "format_error", detail


def test_lone_surrogates_stay_printable(tmp_path: Path) -> None:
    f = tmp_path / "s.json"
    f.write_text('[{"ph": "X", "name": "f\\udcff", "pid": 1, "tid": 1, "ts": 0, "dur": 5}]')
    pag = perflow.read(f)
    assert list(pag.vertex_table["name"].astype(str)) == ["f\\udcff"]
    e = FormatError("dir/\udcffname", "bad \udcff")
    assert str(e) == "dir/\\udcffname: bad \\udcff"


def test_cube_damaged_anchor(tmp_path: Path) -> None:
    s = _cube_sample(tmp_path)
    M.cube_dup_cnode(s, random.Random(4))
    with pytest.raises(FormatError, match=r"profile\.cubex \(anchor\.xml\): cnode id \d+ is defined twice"):
        perflow.read(s.read_path)


def test_recording_with_inconsistent_events(tmp_path: Path) -> None:
    from perflow.synthetic import raw_trace
    from perflow.trace.store import save_raw

    raw = raw_trace(nprocs=2, iterations=2)
    raw.region_events["location"][:] = 7  # no such location
    d = tmp_path / "rec"
    (d / "raw").mkdir(parents=True)
    save_raw(raw, d / "rawtrace.npz")
    with pytest.raises(
        FormatError, match=r"rawtrace\.npz: inconsistent events: .*region event refers to a location outside"
    ):
        perflow.read(d)


# ------------------------------------------------------------------------ the net under the readers, and the CLI
class _Broken:
    FORMAT = "broken"
    DESCRIPTION = "a reader that fails"
    error: BaseException = KeyError("k")

    @staticmethod
    def detect(path: Path) -> bool:
        return False

    @staticmethod
    def read(path: Path, **options: object) -> object:
        if options:
            raise TypeError("the broken reader takes no options")
        return _Broken.decode(path)

    @staticmethod
    def decode(path: Path) -> object:
        raise _Broken.error


@pytest.fixture
def broken(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    import sys
    import types

    mod = types.ModuleType("perflow_test_broken_reader")
    for k in ("FORMAT", "DESCRIPTION", "detect", "read"):
        setattr(mod, k, getattr(_Broken, k))
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    from perflow import readers

    monkeypatch.setitem(readers.READER_MODULES, "broken", mod.__name__)
    f = tmp_path / "data.bin"
    f.write_bytes(b"x")
    return f


@pytest.mark.parametrize(
    "error", [KeyError("k"), MemoryError(), RecursionError("deep"), UnicodeEncodeError("utf-8", "\udcff", 0, 1, "x")]
)
def test_entry_point_turns_unexpected_errors_into_format_errors(broken: Path, error: BaseException) -> None:
    _Broken.error = error
    with pytest.raises(FormatError, match=r"data\.bin: cannot read this broken data \(" + type(error).__name__) as ei:
        perflow.read(broken, format="broken")
    assert ei.value.__cause__ is error
    assert ei.value.unexpected  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="takes no options"):  # a bad option stays a TypeError
        perflow.read(broken, format="broken", bogus=1)


def test_cli_exit_status_and_debug_traceback(broken: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from perflow.cli.main import main

    _Broken.error = KeyError("k")
    assert main(["info", str(broken), "--format", "broken"]) == 2
    err = capsys.readouterr().err
    assert "perflow: error: " in err and "data.bin: cannot read this broken data (KeyError: 'k')" in err
    assert "Traceback" not in err
    assert main(["info", str(broken), "--format", "broken", "--debug"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and "KeyError: 'k'" in err and "direct cause" in err


# ------------------------------------------------------------------- 7. text, JSON and detection failures are clean
def test_cali_that_is_not_utf8(tmp_path: Path) -> None:
    f = tmp_path / "a.cali"
    f.write_bytes((_CALI_HEAD + "__rec=node,id=20,attr=13,data=a\xff\n").encode("latin-1"))
    n = len(_CALI_HEAD) + len("__rec=node,id=20,attr=13,data=a")
    with pytest.raises(FormatError, match=rf"a\.cali \(byte {n}\): not UTF-8 text \(invalid start byte\)") as ei:
        perflow.read(f, format="caliper")
    assert not getattr(ei.value, "unexpected", False)


def test_caliper_json_bad_text_and_deep_nesting(tmp_path: Path) -> None:
    f = tmp_path / "c.json"
    f.write_bytes(b'{"data": [], "columns": ["\xff"], "nodes": []}')
    with pytest.raises(FormatError, match=r"c\.json \(byte 26\): not UTF-8 text") as ei:
        perflow.read(f, format="caliper")
    assert not getattr(ei.value, "unexpected", False)
    n = 100_000  # json's recursion: was a RecursionError (or, caught by the net, an 'unexpected' one)
    f.write_text('{"data": [], "columns": [], "nodes": ' + "[" * n + "]" * n + "}")
    with pytest.raises(FormatError, match=r"c\.json: JSON nested deeper than the parser's limit") as ei:
        perflow.read(f, format="caliper")
    assert not getattr(ei.value, "unexpected", False)


def test_damaged_saved_pag_manifest(tmp_path: Path) -> None:
    d = tmp_path / "pag"
    d.mkdir()
    (d / "manifest.json").write_text("[1, 2]")  # the detector used to call .get on it: AttributeError
    with pytest.raises(FormatError, match=r"pag: cannot tell the format"):
        perflow.read(d)
    with pytest.raises(FormatError, match=r"manifest\.json: a manifest must be a JSON object, not a list"):
        perflow.read(d, format="pag")
    (d / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(FormatError, match=r"manifest\.json: JSON nested deeper"):
        perflow.read(d, format="pag")


@pytest.mark.parametrize(
    "change,message",
    [  # each was a KeyError or TypeError from deep inside load()
        (lambda m: m["tables"]["metrics"].pop("rows"), r"field 'tables\.metrics\.rows': expected an integer >= 0"),
        (lambda m: m["tables"]["vertices"].update(file="../x"), r"field 'tables\.vertices\.file': '\.\./x' is not"),
        (lambda m: m.update(metric_info=[1]), r"field 'metric_info': expected an object, got a list"),
        (lambda m: m["metric_info"].update(time={"mkde": 1}), r"field 'metric_info\.time\.mkde': unknown field"),
    ],
)
def test_damaged_saved_pag_tables(tmp_path: Path, change, message: str) -> None:  # type: ignore[no-untyped-def]
    from perflow.synthetic import profile

    d = profile(nvertices=20, nprocs=2).save(tmp_path / "pag")
    m = json.loads((d / "manifest.json").read_text())
    change(m)
    (d / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(FormatError, match=r"manifest\.json: " + message) as ei:
        perflow.read(d)
    assert not getattr(ei.value, "unexpected", False)


def test_a_failing_detector_just_says_no(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from perflow.readers import detect_format, reader_module

    def fails(path: Path) -> bool:
        raise ValueError("odd content")

    for fmt in ("caliper", "cube", "tau"):  # asked before chrome
        monkeypatch.setattr(reader_module(fmt), "detect", fails)
    assert detect_format(REPO / "tests/data/chrome/pytorch.json") == "chrome"
