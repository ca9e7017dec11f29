"""Files that cannot be read whole: each error names the file and line, says
why, and surfaces as ``ExportFormatError`` (never datasets' bare
``DatasetGenerationError``), with the original exception chained."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import subprocess
import sys
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import DATA, read_jsonl, seeded_rows, write_jsonl
from whileai_datasets import BadRowsWarning, ExportFormatError

GOOD = read_jsonl(DATA / "otel.jsonl")[0]
CUT_HINT = r"The download or copy was probably cut short: fetch the file again"


def _fails_from(load: Any, path: Path, cause: type[BaseException], pattern: str) -> None:
    """Loading ``path`` raises ``ExportFormatError`` matching ``pattern``, with ``cause`` chained."""
    with pytest.raises(ExportFormatError, match=pattern) as caught:
        load(path)
    assert isinstance(caught.value.__cause__, cause)


def _many_lines() -> bytes:
    """About 1 MB of distinct whileai lines, so every codec emits several blocks."""
    rows = seeded_rows(0)
    lines = []
    for copy in range(24):
        for row in rows:
            lines.append(json.dumps({**row, "copy": copy, "note": f"run {copy}-{len(lines)}"}) + "\n")
    return "".join(lines).encode()


def _zstd() -> tuple[Callable[[bytes], bytes], Callable[[bytes], bytes]]:
    zstandard = pytest.importorskip("zstandard")
    def decode_prefix(data: bytes) -> bytes:
        return bytes(zstandard.ZstdDecompressor().decompressobj().decompress(data))

    return zstandard.ZstdCompressor().compress, decode_prefix


def _lz4() -> tuple[Callable[[bytes], bytes], Callable[[bytes], bytes]]:
    frame = pytest.importorskip("lz4.frame")
    return (
        lambda data: frame.compress(data, block_size=frame.BLOCKSIZE_MAX64KB),
        lambda data: frame.LZ4FrameDecompressor().decompress(data),
    )


#: suffix -> (codec name in the message, compress, what a decoder yields from a prefix)
CODECS: dict[str, Callable[[], tuple[str, Callable[[bytes], bytes], Callable[[bytes], bytes]]]] = {
    "gz": lambda: ("gzip", gzip.compress, lambda data: zlib.decompressobj(31).decompress(data)),
    "bz2": lambda: ("bz2", lambda data: bz2.compress(data, 1), lambda data: bz2.BZ2Decompressor().decompress(data)),
    "xz": lambda: ("xz", lzma.compress, lambda data: lzma.LZMADecompressor().decompress(data)),
    "zst": lambda: ("zstd", *_zstd()),
    "lz4": lambda: ("lz4", *_lz4()),
}


@pytest.mark.parametrize("fraction", [0.3, 0.75, 0.999])
@pytest.mark.parametrize("suffix", sorted(CODECS))
def test_a_compressed_file_cut_short_names_the_line_and_the_likely_cause(
    tmp_path: Path, load: Any, suffix: str, fraction: float
) -> None:
    codec, compress, decode_prefix = CODECS[suffix]()
    packed = compress(_many_lines())
    cut = packed[: int(len(packed) * fraction)]
    path = tmp_path / f"rollouts.jsonl.{suffix}"
    path.write_bytes(cut)
    # the oracle: the codec's own decoder on the bytes that survived
    complete = decode_prefix(cut).count(b"\n")
    expected = (
        rf"^rollouts\.jsonl\.{suffix} line {complete + 1}: the {codec} file ends early: its data stops inside "
        rf"line {complete + 1}, after {complete} complete line\(s\) \(EOFError: .*\)\. {CUT_HINT}"
    )
    _fails_from(load, path, EOFError, expected)


def test_a_cut_gzip_file_says_so_when_streamed(tmp_path: Path, load: Any) -> None:
    data = _many_lines()
    packed = gzip.compress(data)
    path = tmp_path / "rollouts.jsonl.gz"
    path.write_bytes(packed[: len(packed) // 2])
    with pytest.raises(ExportFormatError, match=rf"rollouts\.jsonl\.gz line \d+: the gzip file ends early.*{CUT_HINT}"):
        list(load(path, streaming=True))


def test_a_zstd_file_needs_its_package_and_says_which(tmp_path: Path) -> None:
    pytest.importorskip("zstandard")
    import zstandard

    path = tmp_path / "rollouts.jsonl.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(json.dumps(GOOD).encode() + b"\n"))
    code = (
        "import sys; sys.modules['zstandard'] = None\n"  # as if it were not installed
        "import datasets, whileai_datasets\n"
        "try:\n"
        f"    datasets.load_dataset('whileai/export', data_files={str(path)!r}, split='train',"
        f" cache_dir={str(tmp_path / 'cache')!r})\n"
        "except whileai_datasets.ExportFormatError as err:\n"
        "    print(err)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120).stdout
    assert out.strip() == (
        "rollouts.jsonl.zst: cannot decompress a zstd file: zstandard is not installed. "
        "pip install zstandard, or decompress the file first."
    )


def test_a_whole_zstd_file_reads(tmp_path: Path, load: Any) -> None:
    compress, _ = _zstd()
    path = tmp_path / "rollouts.jsonl.zst"
    data = _many_lines()
    path.write_bytes(compress(data))
    assert load(path).num_rows == data.count(b"\n")


@pytest.mark.parametrize("kind", ["array", "object"])
def test_a_line_nested_past_the_recursion_limit_names_the_line_and_the_limit(
    tmp_path: Path, load: Any, kind: str
) -> None:
    depth = sys.getrecursionlimit() + 10
    deep = "[" * depth + "]" * depth if kind == "array" else '{"a":' * depth + "1" + "}" * depth
    path = write_jsonl(tmp_path / "run.jsonl", [GOOD, json.dumps({"prompt": "x", "lineage": "PLACEHOLDER"}), GOOD])
    path.write_text(path.read_text().replace('"PLACEHOLDER"', deep))
    limit = sys.getrecursionlimit()
    _fails_from(load, path, RecursionError,
                rf"^run\.jsonl line 2 \(row 1\): the row nests lists/objects deeper than can be read: Python's "
                rf"recursion limit is {limit} frames, so nesting must stay well below {limit} levels")


def test_a_deep_line_is_skipped_on_request(tmp_path: Path, load: Any) -> None:
    depth = 5 * sys.getrecursionlimit()  # past orjson's 1024 levels too
    path = write_jsonl(tmp_path / "run.jsonl", [GOOD, "[" * depth + "]" * depth, GOOD])
    first = r"skipped 1 bad row\(s\).*first: run\.jsonl line 2 \(row 1\): the row nests"
    with pytest.warns(BadRowsWarning, match=first):
        ds = load(path, on_bad_row="skip")
    assert ds.num_rows == 2


@pytest.mark.parametrize(
    ("name", "content", "what"),
    [
        ("run.jsonl", b"", "the file is empty"),
        ("run.jsonl", b"\n  \n\r\n", "the file holds only blank lines"),
        ("run.jsonl.gz", gzip.compress(b"", mtime=0), "the file is empty"),
    ],
)
def test_an_empty_file_says_no_rows_in_file(tmp_path: Path, load: Any, name: str, content: bytes, what: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    escaped = name.replace(".", r"\.")
    with pytest.raises(
        ExportFormatError,
        match=rf"^{escaped}: no rows in {escaped}: {what}\. Check that the export that wrote it finished",
    ):
        load(path)


def test_an_empty_parquet_file_says_no_rows(tmp_path: Path, load: Any) -> None:
    path = tmp_path / "run.parquet"
    pq.write_table(pa.table({"messages": pa.array([], pa.list_(pa.struct([("role", pa.string())])))}), path)
    with pytest.raises(ExportFormatError, match=r"^run\.parquet: no rows in run\.parquet"):
        load(path)


def test_an_empty_file_among_others_is_named(tmp_path: Path, load: Any) -> None:
    good = write_jsonl(tmp_path / "a.jsonl", [GOOD, GOOD])
    empty = tmp_path / "b.jsonl"
    empty.write_bytes(b"")
    with pytest.raises(ExportFormatError, match=r"^b\.jsonl: no rows in b\.jsonl: the file is empty"):
        load([str(good), str(empty)])


def test_a_split_whose_rows_were_all_skipped_says_so(tmp_path: Path, load: Any) -> None:
    path = write_jsonl(tmp_path / "run.jsonl", ["{oops", "[1]"])
    with pytest.warns(BadRowsWarning, match=r"skipped 2 bad row\(s\)"), pytest.raises(
        ExportFormatError,
        match=r"^split 'train': no rows in split 'train': all 2 row\(s\) are bad and were left out; "
        r"first: run\.jsonl line 1 \(row 0\): not valid JSON",
    ):
        load(path, on_bad_row="skip")


def test_a_corrupt_parquet_file_names_the_file(tmp_path: Path, load: Any) -> None:
    path = tmp_path / "run.parquet"
    path.write_bytes(b"PAR1" + b"\x00" * 64 + b"PAR1")
    message = r"^run\.parquet: cannot read the file \((OSError|ArrowInvalid): [^\n]*\)\. Check that"
    with pytest.raises(ExportFormatError, match=message):
        load(path)


@pytest.mark.parametrize("tail", [b"", b"PAR1", b"\x10\x00\x00\x00PAR1"], ids=["head", "both-ends", "footer-length"])
def test_a_jsonl_file_that_starts_like_parquet_is_reported_as_jsonl(tmp_path: Path, load: Any, tail: bytes) -> None:
    # four bytes (or the magic at both ends) are not a Parquet file: the error names the JSONL line
    path = tmp_path / "run.jsonl"
    path.write_bytes(b"PAR1" + json.dumps(GOOD).encode() + b"\n" + json.dumps(GOOD).encode() + tail)
    with pytest.raises(ExportFormatError, match=r"^run\.jsonl line 1 \(row 0\): not valid JSON .*the line starts 'PAR1"):
        load(path)


def test_a_line_starting_like_parquet_is_skipped_on_request(tmp_path: Path, load: Any) -> None:
    path = tmp_path / "run.jsonl"
    path.write_bytes(b"PAR1" + json.dumps(GOOD).encode() + b"\n" + json.dumps(GOOD).encode() + b"\n")
    with pytest.warns(BadRowsWarning, match=r"skipped 1 bad row\(s\).*first: run\.jsonl line 1 \(row 0\)"):
        assert load(path, on_bad_row="skip").num_rows == 1


def test_a_real_parquet_file_is_read_as_parquet_whatever_its_name(tmp_path: Path, load: Any) -> None:
    path = tmp_path / "run.jsonl"
    pq.write_table(pa.Table.from_pylist([GOOD, GOOD]), path)
    ds = load(path)
    assert ds.num_rows == 2 and ds[0]["messages"] == load(DATA / "otel.jsonl")[0]["messages"]


def test_a_parquet_file_without_its_footer_names_the_file(tmp_path: Path, load: Any) -> None:
    # pyarrow's ArrowInvalid is also a ValueError: it must not escape as one (hypothesis found this on pyarrow 21)
    path = tmp_path / "run.parquet"
    path.write_bytes(b"PAR1" + json.dumps({"prompt": "x", "messages": []}).encode() * 4 + b"\n")
    message = r"^run\.parquet: cannot read the file \(ArrowInvalid: Parquet magic bytes not found[^\n]*\)\."
    with pytest.raises(ExportFormatError, match=message):
        load(path)


def test_a_lone_surrogate_names_its_line(tmp_path: Path, load: Any) -> None:
    # "\ud83e" alone is a valid JSON escape but half of an emoji: Arrow cannot store it as UTF-8
    lone = json.dumps({"prompt": "x", "messages": [{"role": "user", "content": "cut \ud83e"}]})
    path = write_jsonl(tmp_path / "run.jsonl", [GOOD, GOOD, lone, GOOD])
    _fails_from(load, path, UnicodeEncodeError,
                r"^run\.jsonl line 3 \(row 2\): the row holds \\ud83e, half of a UTF-16 surrogate pair: valid as a "
                r"JSON escape, but not a character")
    with pytest.warns(BadRowsWarning, match=r"skipped 1 bad row\(s\).*first: run\.jsonl line 3 \(row 2\)"):
        assert load(path, on_bad_row="skip").num_rows == 3


def test_a_role_that_is_not_text_names_the_field(tmp_path: Path, load: Any) -> None:
    path = write_jsonl(tmp_path / "run.jsonl", [json.dumps({"messages": [{"role": ["user"], "content": "hi"}]})])
    with pytest.raises(ExportFormatError, match=r"^run\.jsonl line 1 \(row 0\), messages\[0\]\.role: expected one of "
                                                r"'system', 'user', 'assistant', 'tool', got \['user'\]"):
        load(path)
