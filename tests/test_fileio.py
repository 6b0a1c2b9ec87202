"""cir_core.fileio: the one temp-file-then-rename and the one CSV cell rule."""
import threading

import pytest

from cir_core.fileio import atomic_write, atomic_write_path, csv_cell, csv_uncell


def test_threads_writing_one_path_never_leave_half_a_file(tmp_path):
    """Each call has its own temp file: two threads on one path (thumbnails of one item asked
    for by two requests) cannot write into each other's."""
    out = tmp_path / "x.bin"
    payloads = [bytes([i]) * 200_000 for i in range(8)]
    start = threading.Barrier(len(payloads))

    def write(p: bytes) -> None:
        start.wait()
        atomic_write(out, lambda f: f.write(p), binary=True, durable=False)

    threads = [threading.Thread(target=write, args=(p,)) for p in payloads]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out.read_bytes() in payloads
    assert [p.name for p in tmp_path.iterdir()] == ["x.bin"]  # no temp left


def test_a_failed_write_keeps_the_old_file_and_no_temp(tmp_path):
    out = tmp_path / "keep.txt"
    out.write_text("old", encoding="utf-8")

    def boom(f):
        f.write("half")
        raise OSError("disk full")

    with pytest.raises(OSError):
        atomic_write(out, boom, binary=False)
    assert out.read_text(encoding="utf-8") == "old" and len(list(tmp_path.iterdir())) == 1
    with pytest.raises(RuntimeError):
        atomic_write_path(out, lambda tmp: (_ for _ in ()).throw(RuntimeError("x")))
    assert len(list(tmp_path.iterdir())) == 1


@pytest.mark.parametrize("text", ["=1+1", "+cmd", "-2", "@SUM(A1)", "\tx", "\rx", "'quoted", "plain", ""])
def test_a_csv_cell_never_runs_as_a_formula_and_reads_back_exactly(text):
    cell = csv_cell(text)
    assert not str(cell).startswith(("=", "+", "-", "@", "\t", "\r")) or cell == text == ""
    assert csv_uncell(cell) == text
    assert csv_cell(None) == "" and csv_cell(3) == 3


@pytest.mark.parametrize("reader", ["formats", "rankings", "manifest"])
def test_every_jsonl_reader_names_the_file_and_line_of_a_bad_record(tmp_path, reader):
    """The three JSONL readers share `jsonl_objects`: a line that is not JSON, or not an object, is
    an error naming the file and the line, in each reader's own error type."""
    from cir_core.errors import InputError
    from cir_core.eval.qrels import read_rankings
    from cir_core.fileio import read_table
    from cir_core.formats.common import FormatError, read_jsonl

    read, error = {"formats": (read_jsonl, FormatError), "rankings": (read_rankings, InputError),
                   "manifest": (lambda p: read_table(p, InputError), InputError)}[reader]
    good = '{"method": "pact", "scoring": "cosine", "query_id": "q1", "top": ["a", "b"]}'
    path = tmp_path / "rows.jsonl"
    for bad, words in (("{not json", "JSON"), ("[1, 2]", "expected a JSON object"), ("[" * 200_000, "JSON")):
        path.write_text(f"{good}\n\n{bad}\n", encoding="utf-8")
        with pytest.raises(error, match=rf"{path.name}.* line 3: .*{words}"):
            read(path)
    path.write_text(f"{good}\n\n", encoding="utf-8")
    assert len(read(path)[0] if reader == "manifest" else read(path)) == 1
