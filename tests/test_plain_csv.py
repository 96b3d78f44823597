"""The Numba reader of plain integer CSV lines and the scan's other kernels, each against a
plain reference: the line parser against a Python parser of the same rules, the whole reader
against pandas reading every line (``PLAIN_CSV = False``: same codes, or the same error, on
files with every kind of irregular line at random places), the column packer and the range
check against NumPy, and the counting kernel's tables against ``np.bincount``."""

import numpy as np
import pytest

from synth.data import reading as data
from synth._kernels.scan import MAX_DIGITS, count_rows, first_bad_row, pack_column, parse_int_lines
from synth.data import counts
from synth.data.counts import Tally, plan_scan
from synth.errors import DataError
from synth.data.schema import Categorical, Coded, Numeric, Schema

SCHEMA = Schema((Coded("a", 4), Numeric("b", (0, 10, 100, 1000)), Coded("c", 12)))


# -- the line parser against a Python reference ---------------------------------------------


def reference_parse(buf: bytes, start: int, n_fields: int, field_column: list[int], capacity: int, final: bool,
                    empty_ok: set[int] = frozenset()):
    """parse_int_lines' rules, line by line in Python: (rows, end, values) or None to defer;
    an empty field of a column in ``empty_ok`` reads as -1 (``EMPTY``)."""
    rows, at, values = 0, start, []
    while rows < capacity:
        newline = buf.find(b"\n", at)
        if newline < 0:
            if not final or at >= len(buf):
                break
            line, end = buf[at:], len(buf)
        else:
            line, end = buf[at:newline], newline + 1
        if line.endswith(b"\r"):
            line = line[:-1]
        if b"\r" in line or b'"' in line:
            return None
        fields = line.split(b",")
        if len(fields) != n_fields:
            return None
        row = {}
        for field, column in zip(fields, field_column):
            if column >= 0:
                if field == b"" and column in empty_ok:
                    row[column] = -1
                    continue
                if not (field.isdigit() and field.isascii()) or len(field) > MAX_DIGITS:
                    return None
                row[column] = int(field)
        values.append([row[c] for c in sorted(row)])
        rows, at = rows + 1, end
    return rows, at, values


def random_lines(rng, n_lines: int, n_fields: int) -> bytes:
    """Mostly plain lines of digits, some with one irregular field or line end."""
    oddities = [b"", b"-3", b"+3", b"3.5", b" 3", b"x", b'"3"', b"1e3", b"9" * 19, "é".encode(), b"3\r4"]
    lines = []
    for _ in range(n_lines):
        fields = [str(v).encode() for v in rng.integers(0, 50, n_fields)]
        if rng.random() < 0.08:
            fields[rng.integers(n_fields)] = oddities[rng.integers(len(oddities))]
        if rng.random() < 0.03:
            fields.append(b"7")
        if rng.random() < 0.03 and n_fields > 1:
            fields.pop()
        lines.append(b",".join(fields) + (b"\r\n" if rng.random() < 0.2 else b"\n"))
    text = b"".join(lines)
    return text[:-1] if rng.random() < 0.3 else text  # sometimes no final line end


@pytest.mark.parametrize("seed", range(60))
def test_line_parser_matches_the_python_reference(seed):
    rng = np.random.default_rng(seed)
    n_fields = int(rng.integers(1, 5))
    buf = random_lines(rng, int(rng.integers(0, 12)), n_fields)
    cut = int(rng.integers(0, len(buf) + 1))  # the bytes read so far may end anywhere
    final = cut == len(buf) and bool(rng.random() < 0.7)
    buf = buf[:cut]
    field_column = [-1] * n_fields
    read = sorted(rng.choice(n_fields, int(rng.integers(1, n_fields + 1)), replace=False))
    for k, f in enumerate(read):
        field_column[f] = k
    assert_parser_matches_reference(buf, n_fields, field_column, int(rng.integers(1, 15)), final, fill=-1)


def assert_parser_matches_reference(buf: bytes, n_fields: int, field_column: list[int], capacity: int, final: bool,
                                    fill: int, empty_ok: np.ndarray | None = None) -> None:
    """``parse_int_lines`` on ``buf`` gives ``reference_parse``'s rows, end and values (or defers
    where it does); ``empty_ok``: which read fields may be empty (None: the kernel's default)."""
    n_read = sum(1 for k in field_column if k >= 0)
    out = np.full((n_read, capacity), fill, dtype=np.int64)
    flags = () if empty_ok is None else (empty_ok,)
    rows, end, _ = parse_int_lines(np.frombuffer(buf, dtype=np.uint8), 0, n_fields,
                                   np.array(field_column, dtype=np.int64), out, final, *flags)
    allowed = frozenset() if empty_ok is None else {k for k in range(n_read) if empty_ok[k]}
    expected = reference_parse(buf, 0, n_fields, field_column, capacity, final, empty_ok=allowed)
    if expected is None:
        assert rows == -1, buf
        return
    if rows == -1:  # only for a partial last line that already shows it is irregular
        assert not final and expected[0] < capacity and b"\n" not in buf[expected[1]:], buf
        return
    assert (rows, end) == expected[:2], buf
    np.testing.assert_array_equal(out[:, :rows].T, np.array(expected[2], dtype=np.int64).reshape(rows, n_read))


def test_non_ascii_bytes_in_a_field_not_read_are_flagged_not_refused():
    buf = "1,José\n2,Zoë\n".encode()
    out = np.zeros((1, 4), dtype=np.int64)
    rows, end, wide = parse_int_lines(np.frombuffer(buf, dtype=np.uint8), 0, 2, np.array([0, -1]), out, True)
    assert (rows, end, wide) == (2, len(buf), True) and list(out[0, :2]) == [1, 2]


# -- the whole reader against pandas --------------------------------------------------------


def write_table(path, rng, n: int, oddity: bytes | None, at: int, newline: bytes = b"\n", extra_column=False):
    header = ["a", "b", "c"] + (["note"] if extra_column else [])
    lines = [",".join(header).encode()]
    for i in range(n):
        fields = [str(rng.integers(0, 4)), str(rng.integers(0, 1000)), str(rng.integers(0, 12))]
        if extra_column:
            fields.append(["plain", "Zoë", "x y"][i % 3])
        line = ",".join(fields).encode()
        if i == at and oddity is not None:
            line = oddity
        lines.append(line)
    path.write_bytes(newline.join(lines) + newline)


ODDITIES = [None, b"", b"1,2", b"1,2,3,4", b"-1,5,3", b"1,5.5,3", b"1, 5,3", b'1,"5",3', b"1,5,12", b"4,5,3",
            b"1,,3", b"1,5,x", b"1,5,3\r", "1,5,é".encode(), b"1,5,\xff", b"1,99999999999999999999,3",
            b'"1,5,3', b'1,"5\n6",3']


@pytest.mark.parametrize("oddity", ODDITIES)
@pytest.mark.parametrize("bad_rows", ["error", "drop"])
def test_reader_gives_pandas_codes_or_pandas_error(tmp_path, monkeypatch, oddity, bad_rows):
    rng = np.random.default_rng(len(oddity or b"") + (bad_rows == "drop"))
    path = tmp_path / "d.csv"
    write_table(path, rng, 500, oddity, at=int(rng.integers(0, 500)))

    def outcome(plain: bool):
        monkeypatch.setattr(data, "PLAIN_CSV", plain)
        try:
            encoded = data.read(path, SCHEMA, chunk_rows=64, bad_rows=bad_rows)
        except DataError as error:
            return str(error)
        return encoded.codes.tolist(), encoded.clipped, encoded.dropped

    assert outcome(True) == outcome(False)


@pytest.mark.parametrize("newline", [b"\n", b"\r\n"])
@pytest.mark.parametrize("chunk_rows", [1, 7, 10_000])
def test_reader_handles_line_ends_chunks_and_text_in_other_columns(tmp_path, monkeypatch, newline, chunk_rows):
    path = tmp_path / "d.csv"
    write_table(path, np.random.default_rng(5), 300, None, 0, newline, extra_column=True)
    schema = Schema((*SCHEMA, Categorical("note", ("plain", "Zoë", "x y"))))
    monkeypatch.setattr(data, "PLAIN_READ_BYTES", 64)  # many reads, lines cut across them
    calls = []
    monkeypatch.setattr(data, "parse_int_lines", lambda *args: calls.append(1) or parse_int_lines(*args))
    fast = data.read(path, schema, columns=["a", "b", "c"], chunk_rows=chunk_rows).codes
    monkeypatch.setattr(data, "PLAIN_CSV", False)
    np.testing.assert_array_equal(fast, data.read(path, schema, columns=["a", "b", "c"], chunk_rows=chunk_rows).codes)
    assert fast.shape == (300, 3) and len(calls) >= 300 // chunk_rows  # the fast reader read them all


def test_reader_grows_its_buffer_for_lines_longer_than_a_read(tmp_path, monkeypatch):
    """Lines many times the bytes read at a time (long text in a column not read): the
    reader's buffer grows to hold them, and the codes are pandas' codes."""
    rng = np.random.default_rng(11)
    lines = [b"a,b,c,note"] + [b"%d,%d,%d,%s" % (rng.integers(0, 4), rng.integers(0, 1000), rng.integers(0, 12),
                                                 b"x" * int(rng.integers(0, 400))) for _ in range(200)]
    path = tmp_path / "d.csv"
    path.write_bytes(b"\n".join(lines) + b"\n")
    schema = Schema((*SCHEMA, Categorical("note", ("x",))))
    monkeypatch.setattr(data, "PLAIN_READ_BYTES", 16)
    calls = []
    monkeypatch.setattr(data, "parse_int_lines", lambda *args: calls.append(1) or parse_int_lines(*args))
    fast = data.read(path, schema, columns=["a", "b", "c"], chunk_rows=7).codes
    assert len(calls) >= 200 // 7  # the fast reader read every line
    monkeypatch.setattr(data, "PLAIN_CSV", False)
    np.testing.assert_array_equal(fast, data.read(path, schema, columns=["a", "b", "c"], chunk_rows=7).codes)


@pytest.mark.parametrize("oddity", [b'1,5,3,"x y"', b'1,5,3,"x\n2,7,1,y"', b'1,5,3,"a,b"', b"1,5,3", b"1,5,3,\xff",
                                    "1,5,3,Zoë".encode(), b"1,5,3,plain,7"])
def test_text_in_a_column_not_read_gives_pandas_rows(tmp_path, monkeypatch, oddity):
    path = tmp_path / "d.csv"
    write_table(path, np.random.default_rng(3), 200, oddity, at=150, extra_column=True)
    schema = Schema((*SCHEMA, Categorical("note", ("plain", "Zoë", "x y"))))

    def outcome(plain: bool):
        monkeypatch.setattr(data, "PLAIN_CSV", plain)
        try:
            return data.read(path, schema, columns=["a", "b", "c"], chunk_rows=40).codes.tolist()
        except DataError as error:
            return str(error)

    assert outcome(True) == outcome(False)


def test_an_error_after_the_fast_chunks_names_the_row_of_the_file(tmp_path):
    path = tmp_path / "d.csv"
    write_table(path, np.random.default_rng(2), 1000, b"1,5,3,4", at=876)
    with pytest.raises(DataError, match=r"data row 877 \(line 878\) has 4 fields, the header has 3"):
        data.read(path, SCHEMA, chunk_rows=100)
    write_table(path, np.random.default_rng(2), 1000, b"1,5,77", at=876)
    with pytest.raises(DataError, match=r"row 877, column 'c': value 77 is outside the domain 0..11"):
        data.read(path, SCHEMA, chunk_rows=100)


# -- the column packer and the range check against NumPy ----------------------------------


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8, np.uint64])
@pytest.mark.parametrize("seed", range(6))
def test_pack_column_matches_numpy(seed, dtype):
    rng = np.random.default_rng(seed)
    size, n = int(rng.integers(1, 300)), int(rng.integers(0, 500))
    values = rng.integers(0, size, n).astype(dtype)
    if n and rng.random() < 0.7:  # one value out of range somewhere, or past int64 for uint64
        wrong = {np.uint64: 2**63 + 5, np.uint8: 255}.get(dtype, int(rng.choice([-1, size, size + 1000])))
        values[rng.integers(0, n)] = wrong if dtype != np.uint8 or size < 255 else 0
    codes = np.full((n, 3), 7, dtype=np.uint16, order="F")
    bad = pack_column(values, size, codes, 1)
    wrong_at = np.flatnonzero((values.astype(np.float64) < 0) | (values.astype(np.float64) >= size))
    assert bad == (wrong_at[0] if len(wrong_at) else -1)
    upto = n if bad < 0 else bad
    np.testing.assert_array_equal(codes[:upto, 1], values[:upto])
    assert (codes[:, [0, 2]] == 7).all() and (codes[upto:, 1] == 7).all()  # nothing else written


@pytest.mark.parametrize("seed", range(8))
def test_first_bad_row_matches_numpy(seed):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 9, size=int(rng.integers(1, 6)))
    n = int(rng.integers(0, 400))
    codes = np.stack([rng.integers(0, s, n) for s in sizes]).astype(np.int64).reshape(len(sizes), n)
    for _ in range(int(rng.integers(0, 3))):
        if n:
            j = rng.integers(0, len(sizes))
            codes[j, rng.integers(0, n)] = rng.choice([-1, sizes[j], 99])
    wrong = ((codes < 0) | (codes >= sizes[:, None])).any(axis=0)
    assert first_bad_row(codes, sizes) == (int(np.argmax(wrong)) if wrong.any() else -1)


# -- the counting kernel against np.bincount ------------------------------------------------


def bincount_table(codes: np.ndarray, schema: Schema, subset) -> np.ndarray:
    """The reference: the flat table over ``subset`` (row-major, its last column fastest)."""
    size = int(np.prod([schema[n].size for n in subset]))
    if not len(codes):
        return np.zeros(size, dtype=np.int64)
    index = np.ravel_multi_index([codes[:, schema.index(n)] for n in subset], [schema[n].size for n in subset])
    return np.bincount(index, minlength=size)


@pytest.mark.parametrize("seed", range(12))
def test_count_rows_matches_bincount(seed, monkeypatch):
    """Random tables of random plans (maximal subsets apart, or packed into wider tables),
    counted from row-major and column-major chunks, in the caller's thread and on worker
    threads (every chunk large enough to go to one)."""
    monkeypatch.setattr(counts, "PARALLEL_ROWS", 1)
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 7, size=int(rng.integers(1, 6)))
    n = int(rng.integers(0, 3000))
    codes = np.column_stack([rng.integers(0, s, n) for s in sizes]).astype(np.uint8).reshape(n, len(sizes))
    schema = Schema(tuple(Coded(f"c{j}", int(s)) for j, s in enumerate(sizes)))
    subsets = [tuple(schema.names[j] for j in sorted(rng.choice(len(sizes), int(rng.integers(1, len(sizes) + 1)),
                                                                 replace=False))) for _ in range(4)]
    for group_cells in (0, 10**6):
        plan = plan_scan(schema, subsets, histogram_cells=0, group_cells=group_cells)
        for parts in (1, 3):
            with Tally(plan, parts) as tally:
                for k, chunk in enumerate(np.array_split(codes, 5)):
                    tally.add(np.asfortranarray(chunk) if k % 2 else chunk)
                tables = tally.tables()
            for subset, table in tables.items():
                np.testing.assert_array_equal(table, bincount_table(codes, schema, subset))


def test_count_rows_kernel_on_a_packed_table():
    """The kernel alone: keys built column by column, the first listed column slowest."""
    rng = np.random.default_rng(3)
    columns = np.stack([rng.integers(0, 3, 5000), rng.integers(0, 4, 5000), rng.integers(0, 5, 5000)])
    out = np.zeros(2 + 5 * 3, dtype=np.int64)  # the table over (c2, c0) laid from offset 2
    count_rows(columns, np.array([[2, 0]]), np.array([[5, 3]]), np.array([2]), np.array([2]), out)
    expected = np.bincount(columns[2] * 3 + columns[0], minlength=15)
    np.testing.assert_array_equal(out[2:], expected)
    assert (out[:2] == 0).all()


def test_tally_refuses_a_code_out_of_range():
    codes = np.array([[0, 1], [1, 5], [0, 0]], dtype=np.int64)
    schema = Schema((Coded("x", 2), Coded("y", 3)))
    with pytest.raises(DataError, match=r"row 2, column 'y': code 5 is outside 0..2"):
        Tally(plan_scan(schema, [("x", "y")])).add(codes)
