"""The model file (synth.models.model): checksum, header and distribution checks on load.

A damaged or hand-edited model file must be refused with one ``ModelError`` line naming the
file, never a traceback and never "accepted but wrong". Bad files are written by hand here
(``write_npz``), with a checksum computed independently of ``synth.models.model``, so each check is
reached on its own.
"""

import hashlib
import json
import re
import struct
import zipfile

import numpy as np
import pytest
from click.testing import CliRunner

from synth_cli.main import main
from synth.errors import SynthError
from synth.models.model import FORMAT_VERSION, Model, ModelError
from synth.data.schema import Categorical, Coded, Schema
from synth.data.workload import Workload

SCHEMA = Schema((Categorical("colour", ("red", "green")), Coded("c", 3)))
P = np.array([0.1, 0.2, 0.3, 0.15, 0.15, 0.1])


def make_model(**changes) -> Model:
    privacy = {"budget": {"epsilon": 1.0, "delta": 0.0},
               "spent": {"epsilon": 1.0, "delta": 0.0, "method": "basic"}}
    fields = dict(schema=SCHEMA, mechanism="mwem", distribution=P.copy(), rows=120.0, rows_public=False,
                  parameters={"rounds": 3}, privacy=privacy,
                  round_log=[{"round": 1, "query": 4}], seeded=True, library_version="0.1.0")
    fields.update(changes)
    return Model(**fields)


def sha256(distribution) -> str:
    return hashlib.sha256(np.asarray(distribution, dtype="<f8").tobytes()).hexdigest()


def good_header(distribution=P, version=FORMAT_VERSION) -> dict:
    header = make_model().header()
    header["format_version"] = version
    if version >= 2:
        header["distribution_sha256"] = sha256(distribution)
    return header


def write_npz(path, header, distribution, *, meta_bytes=None):
    """A model file by hand: ``header`` as the JSON meta (or raw ``meta_bytes``) beside ``distribution``."""
    raw = json.dumps(header).encode("utf-8") if meta_bytes is None else meta_bytes
    np.savez_compressed(path, distribution=np.asarray(distribution), meta=np.frombuffer(raw, dtype=np.uint8))
    return path


def refused(path, message):
    """``Model.load(path)`` raises ModelError (no other type) whose message is ``path: message``."""
    with pytest.raises(ModelError, match="^" + re.escape(f"{path}: {message}")):
        Model.load(path)


# -- round trip --------------------------------------------------------------------------------


def test_round_trip_keeps_everything_and_stores_the_checksum(tmp_path):
    model = make_model()
    model.save(tmp_path / "m.npz")
    loaded = Model.load(tmp_path / "m.npz")
    np.testing.assert_array_equal(loaded.distribution, P)
    assert loaded.header() == model.header() and loaded.schema == SCHEMA
    assert (loaded.rows, loaded.rows_public, loaded.seeded) == (120.0, False, True)
    with np.load(tmp_path / "m.npz", allow_pickle=False) as archive:
        meta = json.loads(archive["meta"].tobytes().decode("utf-8"))
        stored = archive["distribution"]
    assert FORMAT_VERSION == 3 and meta["format_version"] == 3 and "representation" not in meta
    assert stored.dtype == np.dtype("<f8") and meta["distribution_sha256"] == sha256(P)


def test_save_writes_a_distribution_summing_to_one(tmp_path):
    make_model(distribution=np.array([2, 4, 6, 3, 3, 2])).save(tmp_path / "m.npz")  # integer weights
    loaded = Model.load(tmp_path / "m.npz")
    np.testing.assert_allclose(loaded.distribution, P, rtol=1e-15)


@pytest.mark.parametrize("change, message", [
    ({"rows": -5}, "model field 'rows' must be a finite number >= 0, got -5"),
    ({"mechanism": ""}, "model field 'mechanism' must be a non-empty string, got ''"),
    ({"distribution": np.zeros(6)}, "the distribution is all zero"),
    ({"distribution": np.ones(5)}, "the distribution has shape (5,), the schema's universe 6 cells"),
    ({"distribution": np.array([1, -1, 0, 0, 1, 1.0])},
     "the distribution holds 1 negative values (cell 1: -1.0)"),
])
def test_save_refuses_a_model_load_would_refuse_and_writes_nothing(tmp_path, change, message):
    where = f"{tmp_path / 'm.npz'}: cannot save the model"
    with pytest.raises(ModelError, match=re.escape(f"{where}: {message}")):
        make_model(**change).save(tmp_path / "m.npz")
    assert list(tmp_path.iterdir()) == []


# -- the header --------------------------------------------------------------------------------


def _without(key):
    return lambda h: h.pop(key)


def _set(key, value):
    return lambda h: h.__setitem__(key, value)


@pytest.mark.parametrize("edit, message", [
    (_without("rows"), "header field 'rows' is missing"),
    (_set("rows", "many"), "header field 'rows' must be a finite number >= 0, got 'many'"),
    (_set("rows", -5), "header field 'rows' must be a finite number >= 0, got -5"),
    (_set("rows", float("nan")), "header field 'rows' must be a finite number >= 0, got nan"),
    (_set("rows", float("inf")), "header field 'rows' must be a finite number >= 0, got inf"),
    (_set("rows", True), "header field 'rows' must be a finite number >= 0, got True"),
    (_set("rows", 10**400), "header field 'rows' must be a finite number >= 0, got 1000"),
    (_set("rows", None), "header field 'rows' must be a finite number >= 0, got None"),
    (_without("mechanism"), "header field 'mechanism' is missing"),
    (_set("mechanism", ""), "header field 'mechanism' must be a non-empty string, got ''"),
    (_set("mechanism", 3), "header field 'mechanism' must be a non-empty string, got 3"),
    (_without("schema"), "header field 'schema' is missing"),
    (_set("schema", [1, 2]), "header field 'schema' must be an object, got [1, 2]"),
    (_set("rows_public", "yes"), "header field 'rows_public' must be true or false, got 'yes'"),
    (_set("rows_public", 1), "header field 'rows_public' must be true or false, got 1"),
    (_without("rows_public"), "header field 'rows_public' is missing"),
    (_set("parameters", []), "header field 'parameters' must be an object, got []"),
    (_set("privacy", "none"), "header field 'privacy' must be an object, got 'none'"),
    (_set("round_log", {}), "header field 'round_log' must be a list, got {}"),
    (_set("seeded", "no"), "header field 'seeded' must be true or false, got 'no'"),
    (_set("library_version", 1), "header field 'library_version' must be a string, got 1"),
    (_set("privacy", {"spent": 1}), "header field 'privacy.spent' must be an object, got 1"),
    (_set("privacy", {"spent": {"epsilon": "x"}}),
     "header field 'privacy.spent.epsilon' must be a number >= 0, got 'x'"),
    (_set("privacy", {"budget": {"delta": -1}}),
     "header field 'privacy.budget.delta' must be a number >= 0, got -1"),
    (_set("distribution_sha256", "abc"),
     "header field 'distribution_sha256' must be 64 lowercase hex digits"),
    (_set("distribution_sha256", sha256(P).upper()),
     "header field 'distribution_sha256' must be 64 lowercase hex digits"),
    (_without("distribution_sha256"), "header field 'distribution_sha256' is missing"),
    (_set("extra", 1), "unknown header field 'extra' (a version 3 header has: distribution_sha256, factors, format,"),
    (_without("format_version"), "header field 'format_version' is missing"),
    (_without("format"), "not a synth model file (header format None)"),
    (_set("format", "other"), "not a synth model file (header format 'other')"),
])
def test_each_bad_header_field_is_named(tmp_path, edit, message):
    header = good_header()
    edit(header)
    refused(write_npz(tmp_path / "m.npz", header, P), message)


def test_the_header_must_be_a_utf8_json_object_without_repeated_fields(tmp_path):
    text = json.dumps(good_header())
    cases = [
        (b"\xff\xfe{}", "damaged model file: the header is not UTF-8 text"),
        (text[:-1].encode(), "damaged model file: the header is not JSON"),
        (b"[1, 2]", "not a synth model file (the header is not a JSON object)"),
        (text.replace('"rows": 120.0', '"rows": 120.0, "rows": 7').encode(),
         "damaged model file: header field 'rows' appears twice"),
    ]
    for i, (raw, message) in enumerate(cases):
        refused(write_npz(tmp_path / f"m{i}.npz", None, P, meta_bytes=raw), message)
    np.savez_compressed(tmp_path / "f.npz", distribution=P, meta=np.array([1.0, 2.0]))
    refused(tmp_path / "f.npz", "damaged model file: the header is not stored as bytes")


def test_a_malformed_schema_is_a_synth_error_naming_the_file(tmp_path, monkeypatch):
    schemas = [{"columns": [{"name": "colour", "type": ["coded"], "size": 2}]},
               {"columns": []}, {"colour": "two"}]
    for i, schema in enumerate(schemas):
        header = good_header()
        header["schema"] = schema
        with pytest.raises(SynthError, match="^" + re.escape(f"{tmp_path / f'm{i}.npz'}: ")):
            Model.load(write_npz(tmp_path / f"m{i}.npz", header, P))
    with pytest.raises(SynthError, match=r"type \['coded'\] must be one of"):
        Model.load(tmp_path / "m0.npz")

    def unexpected(*args, **kwargs):  # any other failure inside Schema.from_dict still names the file
        raise TypeError("unhashable type: 'list'")

    monkeypatch.setattr(Schema, "from_dict", unexpected)
    with pytest.raises(ModelError, match=r"header field 'schema' is malformed \(TypeError"):
        Model.load(tmp_path / "m0.npz")


# -- versions ----------------------------------------------------------------------------------


def test_version_1_files_still_load_and_are_checked_the_same_way(tmp_path):
    header = good_header(version=1)
    assert "distribution_sha256" not in header
    model = Model.load(write_npz(tmp_path / "v1.npz", header, P))
    np.testing.assert_array_equal(model.distribution, P)
    assert model.rows == 120.0 and model.mechanism == "mwem"
    # v1 wrote distributions as given: weights that do not sum to 1 are normalised
    weights = Model.load(write_npz(tmp_path / "w.npz", header, 20 * P))
    np.testing.assert_allclose(weights.distribution, P, rtol=1e-15)
    header["rows"] = -5
    refused(write_npz(tmp_path / "bad.npz", header, P),
            "header field 'rows' must be a finite number >= 0, got -5")
    refused(write_npz(tmp_path / "z.npz", good_header(version=1), np.zeros(6)),
            "the distribution is all zero")
    with_checksum = good_header(version=1)
    with_checksum["distribution_sha256"] = sha256(P)
    refused(write_npz(tmp_path / "c.npz", with_checksum, P), "unknown header field 'distribution_sha256'")


def test_version_2_dense_files_still_load(tmp_path):
    model = Model.load(write_npz(tmp_path / "v2.npz", good_header(version=2), P))
    np.testing.assert_array_equal(model.distribution, P)
    factored_field = good_header(version=2)
    factored_field["representation"] = "factored"
    refused(write_npz(tmp_path / "f.npz", factored_field, P), "unknown header field 'representation'")


@pytest.mark.parametrize("version", [99, 0, 4, "2", 2.0, True, None])
def test_other_versions_are_refused_naming_the_version(tmp_path, version):
    header = good_header()
    header["format_version"] = version
    refused(write_npz(tmp_path / "m.npz", header, P),
            f"model format version {version!r} is not supported (this synth reads versions 1, 2 and 3"
            + ("; a newer file needs a newer synth)" if version in (4, 99) else ")"))


# -- the distribution --------------------------------------------------------------------------


def test_a_changed_distribution_fails_the_checksum(tmp_path):
    edited = P.copy()
    edited[[0, 1]] = edited[[1, 0]]  # still sums to 1, still valid: only the checksum can tell
    refused(write_npz(tmp_path / "m.npz", good_header(P), edited),
            "damaged model file: checksum of the distribution does not match its header "
            "(the file was changed after it was written)")


BIG = np.finfo(np.float64).max / 2


@pytest.mark.parametrize("distribution, message", [
    (np.zeros(6), "the distribution is all zero: there is nothing to answer or sample from"),
    (np.array([0.5, -0.1, 0.2, 0.2, 0.1, 0.1]), "the distribution holds 1 negative values (cell 1: -0.1)"),
    (np.array([0.5, np.nan, 0.2, 0.2, 0.1, np.nan]),
     "the distribution holds 2 non-finite values (cell 1: nan)"),
    (np.array([0.5, 0.1, np.inf, 0.2, 0.1, 0.1]), "the distribution holds 1 non-finite values (cell 2: inf)"),
    (np.full(6, 1e308), "the distribution's sum overflows (largest cell 1e+308)"),
    (np.array([BIG, BIG, BIG, 0, 0, 0]), "the distribution's sum overflows"),
    (np.array([1e308, 0, 0, 0, 0, 0]), "the distribution sums to 1e+308, not 1"),
    (2 * P, "the distribution sums to 2, not 1 (a synth model always sums to 1)"),
    (np.full(7, 1 / 7), "the distribution has shape (7,), the schema's universe 6 cells"),
    (P.reshape(2, 3), "the distribution has shape (2, 3), the schema's universe 6 cells"),
    (np.array([1, 0, 0, 0, 0, 0]), "the distribution must hold floats (float64), got dtype int64"),
    (np.array([1, 0, 0, 0, 0, 0], dtype=bool), "the distribution must hold floats (float64), got dtype bool"),
])
def test_bad_distributions_with_a_matching_checksum_are_refused(tmp_path, distribution, message):
    refused(write_npz(tmp_path / "m.npz", good_header(distribution), distribution), message)


# -- damage to the archive ---------------------------------------------------------------------


def _regions(path) -> dict[str, int]:
    """An offset inside each part of the zip: both compressed arrays, the central directory, its end."""
    data = path.read_bytes()
    with zipfile.ZipFile(path) as archive:
        infos = {info.filename: info for info in archive.infolist()}
    regions = {}
    for name, info in infos.items():
        local = info.header_offset
        name_length, extra_length = struct.unpack("<HH", data[local + 26:local + 30])
        start = local + 30 + name_length + extra_length
        regions[f"{name} data"] = start + info.compress_size // 2
        regions[f"{name} local header name"] = local + 30
    end = data.rindex(b"PK\x05\x06")
    directory = struct.unpack("<I", data[end + 16:end + 20])[0]
    regions["central directory signature"] = directory
    regions["central directory crc"] = directory + 16
    regions["central directory name"] = directory + 46
    regions["end of central directory"] = end + 16  # where the central directory starts
    return regions


def _flipped(path, good: bytes, position: int, mask: int = 0xFF):
    damaged = bytearray(good)
    damaged[position] ^= mask
    path.write_bytes(bytes(damaged))
    return path


def test_one_flipped_byte_in_each_part_of_the_file_is_refused(tmp_path):
    make_model().save(tmp_path / "m.npz")
    good = (tmp_path / "m.npz").read_bytes()
    regions = _regions(tmp_path / "m.npz")
    assert len(regions) == 8
    for region, position in regions.items():
        for mask in (0xFF, 0x01):
            bad = _flipped(tmp_path / "bad.npz", good, position, mask)
            with pytest.raises(ModelError, match="^" + re.escape(f"{bad}: ")):
                Model.load(bad)


def test_a_flipped_byte_anywhere_is_refused_or_changes_nothing(tmp_path):
    """Bytes the zip reader ignores (timestamps, local copies of sizes) may load, but then unchanged."""
    model = make_model()
    model.save(tmp_path / "m.npz")
    good = (tmp_path / "m.npz").read_bytes()
    refused_count = 0
    for position in range(0, len(good), 4):
        bad = _flipped(tmp_path / "bad.npz", good, position, 0xFF if position % 8 else 0x10)
        try:
            loaded = Model.load(bad)
        except ModelError as exc:
            assert str(exc).startswith(f"{bad}: ") and "\n" not in str(exc)
            refused_count += 1
        else:
            np.testing.assert_array_equal(loaded.distribution, P)
            assert loaded.header() == model.header()
    assert refused_count > len(good) // 4 // 2  # most bytes matter


def test_truncated_or_empty_files_are_refused(tmp_path):
    make_model().save(tmp_path / "m.npz")
    good = (tmp_path / "m.npz").read_bytes()
    for length in (0, 1, 30, len(good) // 2, len(good) - 23, len(good) - 1):
        (tmp_path / "cut.npz").write_bytes(good[:length])
        with pytest.raises(ModelError, match="^" + re.escape(f"{tmp_path / 'cut.npz'}: ")):
            Model.load(tmp_path / "cut.npz")


def test_missing_files_folders_and_raw_members_are_refused(tmp_path):
    refused(tmp_path / "none.npz", "no such file")
    (tmp_path / "dir.npz").mkdir()
    refused(tmp_path / "dir.npz", "is a folder, not a model file")
    with zipfile.ZipFile(tmp_path / "raw.npz", "w") as archive:  # members that are not .npy arrays
        archive.writestr("distribution", b"\x00" * 48)
        archive.writestr("meta", json.dumps(good_header()).encode())
    refused(tmp_path / "raw.npz", "damaged model file: the header is not stored as bytes")


# -- the CLI -----------------------------------------------------------------------------------


def _bad_files(folder) -> dict[str, object]:
    make_model().save(folder / "good.npz")
    good = (folder / "good.npz").read_bytes()
    header = good_header()
    header["rows"] = -5
    no_rows = good_header()
    del no_rows["rows"]
    flipped = _regions(folder / "good.npz")["distribution.npy data"]
    return {
        "rows -5": write_npz(folder / "rows.npz", header, P),
        "rows missing": write_npz(folder / "norows.npz", no_rows, P),
        "all zero": write_npz(folder / "zero.npz", good_header(np.zeros(6)), np.zeros(6)),
        "checksum": write_npz(folder / "sum.npz", good_header(P), P[::-1]),
        "flipped byte": _flipped(folder / "flip.npz", good, flipped),
        "truncated": _flipped(folder / "cut.npz", good[:-40] + b"\0" * 40, 0, 0),
    }


def test_cli_refuses_bad_models_in_one_line_and_writes_nothing(tmp_path):
    Workload.marginals(SCHEMA, 1).save(tmp_path / "w.json")
    out = tmp_path / "out.csv"
    for damage, bad in _bad_files(tmp_path).items():
        for command in (["answer", "--model", bad, "--workload", tmp_path / "w.json", "-o", out],
                        ["sample", "--model", bad, "-o", out]):
            result = CliRunner().invoke(main, [str(a) for a in command])
            where = f"{command[0]} on {damage}"
            assert result.exit_code == 1, where
            assert isinstance(result.exception, SystemExit), (where, result.exception)  # nothing escaped
            assert "Traceback" not in result.output, where
            lines = result.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith(f"Error: {bad}: "), (where, result.stderr)
            assert not out.exists(), where
    good = CliRunner().invoke(main, ["sample", "--model", str(tmp_path / "good.npz"), "-o", str(out)])
    assert good.exit_code == 0 and out.exists(), good.output
