"""Bundles without a database: hostile archives, the secret scan, manifest, RO-Crate, determinism, compare.

Secrets planted here are assembled at run time, so this file itself holds none (the bundle's scan of the
project's source would otherwise refuse it).
"""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from pathlib import Path

import numpy as np
import pytest

from demuxlab.bundle import layout
from demuxlab.bundle.archive import BundleError, Entry, extract, write_archive
from demuxlab.bundle.compare import compare_pixels, compare_table
from demuxlab.bundle.ops import check, rerun_spec_text
from demuxlab.bundle.safety import Limits, UnsafeArchive, check_member, scan_secrets

P = layout.PREFIX


def raw_tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]], compress: str = "gz") -> Path:
    """An archive with exactly these members, as an attacker would write it (no checks)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    raw = buf.getvalue()
    path.write_bytes(gzip.compress(raw) if compress == "gz" else raw)
    return path


def member(
    name: str, data: bytes = b"x", kind: bytes = tarfile.REGTYPE, link: str = ""
) -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    return info, data if kind == tarfile.REGTYPE else None


@pytest.mark.parametrize(
    ("members", "message"),
    [
        ([member(f"{P}/../evil.txt")], "path with '..'"),
        ([member(f"{P}/a/../../evil.txt")], "path with '..'"),
        ([member("/etc/evil.txt")], "absolute path"),
        ([member("elsewhere/file.txt")], "outside the bundle folder"),
        ([member(f"{P}/link", kind=tarfile.SYMTYPE, link="/etc/passwd")], "symbolic link"),
        ([member(f"{P}/up", kind=tarfile.SYMTYPE, link="../../x")], "symbolic link"),
        ([member(f"{P}/hard", kind=tarfile.LNKTYPE, link="/etc/shadow")], "hard link"),
        ([member(f"{P}/dev", kind=tarfile.CHRTYPE)], "device"),
        ([member(f"{P}/fifo", kind=tarfile.FIFOTYPE)], "FIFO"),
        ([member(f"{P}/a.txt"), member(f"{P}/a.txt")], "appears twice"),
    ],
)
def test_hostile_archive_is_refused_and_nothing_escapes(
    tmp_path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]], message: str
) -> None:
    bad = raw_tar(tmp_path / "bad.tar.gz", [member(f"{P}/ok.txt"), *members])
    dest = tmp_path / "x" / "out"
    with pytest.raises(BundleError, match=message) as info:
        extract(bad, dest)
    assert "\n" not in info.value.message and str(bad) in info.value.message
    assert not (tmp_path / "x" / "evil.txt").exists() and not (tmp_path / "evil.txt").exists()
    assert not list(dest.rglob("link")) and not list(dest.rglob("hard"))


def test_huge_declared_size_is_refused_before_reading(tmp_path: Path) -> None:
    # A header declaring 1 TiB followed by a few bytes: refused on the header, nothing is read or written.
    info = tarfile.TarInfo(f"{P}/huge.bin")
    info.size = 1 << 40
    header = info.tobuf(tarfile.PAX_FORMAT)
    bad = tmp_path / "huge.tar.gz"
    bad.write_bytes(gzip.compress(header + b"\0" * 1024))
    with pytest.raises(BundleError, match="declared size 1099511627776 bytes exceeds"):
        extract(bad, tmp_path / "out")
    assert not (tmp_path / "out" / "huge.bin").exists()


def test_decompression_bomb_is_stopped_at_the_limit(tmp_path: Path) -> None:
    # 64 MiB of zeros compress to ~64 KiB; a 16 MiB limit must stop it (declared sizes and the byte count).
    bomb = b"\0" * (64 << 20)
    bad = raw_tar(tmp_path / "bomb.tar.gz", [member(f"{P}/zeros.bin", bomb)])
    assert bad.stat().st_size < 1 << 20
    with pytest.raises(BundleError, match="exceeds"):
        extract(bad, tmp_path / "out", Limits.scaled(16 << 20))
    many = raw_tar(tmp_path / "many.tar.gz", [member(f"{P}/{i}.bin", b"\0" * (4 << 20)) for i in range(8)])
    with pytest.raises(BundleError, match="total size exceeds"):
        extract(many, tmp_path / "out2", Limits.scaled(16 << 20))


def test_truncated_and_garbage_archives_are_one_line_errors(tmp_path: Path) -> None:
    good = tmp_path / "good.tar.gz"
    write_archive(good, {"a.bin": Entry(data=np.random.default_rng(2).bytes(100_000))})
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(good.read_bytes()[:2000])
    with pytest.raises(BundleError, match="not a readable bundle archive"):
        extract(cut, tmp_path / "o1")
    junk = tmp_path / "junk.tar.zst"
    junk.write_bytes(b"\x28\xb5\x2f\xfd" + b"garbage" * 100)
    with pytest.raises(BundleError, match="not a readable bundle archive"):
        extract(junk, tmp_path / "o2")


def test_check_member_accepts_regular_files_under_the_prefix() -> None:
    assert check_member(f"{P}/a/b.json", "file", 10, Limits()) == "a/b.json"
    assert check_member(f"./{P}/./a.json", "file", 10, Limits()) == "a.json"
    assert check_member(f"{P}/", "dir", 0, Limits()) is None
    with pytest.raises(UnsafeArchive, match="NUL"):
        check_member(f"{P}/a\x00b", "file", 1, Limits())


@pytest.mark.parametrize("compress", ["tar.gz", "tar.zst"])
def test_archive_is_deterministic_and_extracts_back(tmp_path: Path, compress: str) -> None:
    entries = {
        "b/data.json": Entry(data=b'{"x": 1}\n'),
        "a/tool": Entry(data=b"\x7fELF...", executable=True),
        "big.bin": Entry(data=np.random.default_rng(1).bytes(300_000)),
    }
    one, two = tmp_path / f"one.{compress}", tmp_path / "again" / f"one.{compress}"
    write_archive(one, entries)
    write_archive(two, dict(reversed(list(entries.items()))))
    assert one.read_bytes() == two.read_bytes()
    if compress == "tar.gz":
        assert one.read_bytes()[4:8] == b"\0\0\0\0"  # no time in the gzip header
    raw = one.read_bytes()
    if compress == "tar.zst":
        import zstandard

        raw = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw)).read()
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        infos = tar.getmembers()
    assert [i.name for i in infos] == [f"{P}/a/tool", f"{P}/b/data.json", f"{P}/big.bin"]
    assert {(i.mtime, i.uid, i.gid, i.uname, i.gname) for i in infos} == {(layout.MTIME, 0, 0, "", "")}
    digests = extract(one, tmp_path / "out")
    assert digests == {k: layout.sha256_hex(e.data or b"") for k, e in entries.items()}
    assert (tmp_path / "out" / "a" / "tool").stat().st_mode & 0o777 == 0o755
    assert (tmp_path / "out" / "b" / "data.json").stat().st_mode & 0o777 == 0o644


def test_bad_output_name_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BundleError, match=r"must end in \.tar\.zst or \.tar\.gz"):
        write_archive(tmp_path / "x.zip", {"a": Entry(data=b"")})


# -- secrets ------------------------------------------------------------------------------------------------

BEGIN = "-----BEGIN "
KEY_BLOCK = f"{BEGIN}OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n"


@pytest.mark.parametrize(
    ("path", "text", "kind"),
    [
        ("report/id_ed25519", KEY_BLOCK, "private key"),
        (
            "model/x.json",
            '{"url": "postgresql+psycopg://lab:' + "Tr0ub4dor" + '@db.example/lab"}',
            "password in a URL",
        ),
        (
            "inventory/hosts.yaml",
            "all:\n  vars:\n    ansible_become_password: " + "hunter2hunter2\n",
            "ansible",
        ),
        ("inventory/group_vars/all.yml", "$ANSIBLE" + "_VAULT;1.1;AES256\n6162", "Ansible Vault"),
        ("notes.txt", "token = " + "ghp_" + "a" * 36, "GitHub token"),
        ("config.ini", "[aws]\nkey=" + "AKIA" + "ABCDEFGHIJKLMNOP\n", "AWS access key"),
        ("settings.yaml", "api_key: " + "'9f8e7d6c5b4a'\n", "api_key"),
    ],
)
def test_planted_secrets_are_found(path: str, text: str, kind: str) -> None:
    findings = scan_secrets(path, text.encode())
    assert findings, f"{kind} not found"
    assert any(kind.lower() in f.kind.lower() for f in findings), findings
    assert str(findings[0]).startswith(f"{path}:")


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("README.md", "Set `postgresql+psycopg://user:pass@host/db` to use another server"),
        ("hosts.yaml", "ansible_become_password: '{{ vault_become_password }}'\n"),
        ("run.json", '{"password": null, "token": "***", "url": "postgresql+psycopg://postgres@/demuxlab"}'),
        ("code.py", "password = parsed.password  # not a data file: key = value is not flagged"),
    ],
)
def test_placeholders_and_code_are_not_secrets(path: str, text: str) -> None:
    assert scan_secrets(path, text.encode()) == []


def test_known_password_of_this_machine_is_found_anywhere() -> None:
    found = scan_secrets("report/points.csv", b"a,b\nx,S3cr3tValue\n", known=[b"S3cr3tValue"])
    assert [f.line for f in found] == [2]


# -- manifest, RO-Crate, verify -----------------------------------------------------------------------------


def bundle_files() -> dict[str, bytes]:
    files = {"a/data.csv": b"x,y\n1,2\n", "bundle.json": layout.canonical_json({"format": layout.FORMAT})}
    digests = {k: layout.sha256_hex(v) for k, v in files.items()}
    crate = layout.make_crate(files, digests, name="t", description="d", date_published="2026-11-23")
    files[layout.CRATE] = layout.canonical_json(crate)
    digests[layout.CRATE] = layout.sha256_hex(files[layout.CRATE])
    files[layout.MANIFEST] = layout.make_manifest(digests)
    return files


def written(tmp_path: Path, files: dict[str, bytes], name: str = "b.tar.gz") -> tuple[Path, dict[str, str]]:
    path = tmp_path / name
    write_archive(path, {k: Entry(data=v) for k, v in files.items()})
    root = tmp_path / f"x-{name}"
    return root, extract(path, root)


def test_verify_names_tampered_missing_and_extra_files(tmp_path: Path) -> None:
    files = bundle_files()
    root, digests = written(tmp_path, files)
    assert check(tmp_path / "b.tar.gz", root, digests) == ([], {"format": layout.FORMAT})

    tampered = {**files, "a/data.csv": b"x,y\n1,3\n", "extra.txt": b"hi"}
    del tampered["bundle.json"]
    root, digests = written(tmp_path, tampered, "t.tar.gz")
    problems, _ = check(tmp_path / "t.tar.gz", root, digests)
    text = "\n".join(problems)
    assert "tampered: a/data.csv" in text
    assert "missing: bundle.json" in text
    assert "extra (not in MANIFEST.sha256): extra.txt" in text
    assert f"{layout.CRATE}: File entity a/data.csv: sha256 differs" not in text  # crate matches the manifest


def test_crate_is_checked_against_the_files(tmp_path: Path) -> None:
    files = bundle_files()
    crate = json.loads(files[layout.CRATE])
    crate["@graph"] = [e for e in crate["@graph"] if e["@id"] != "a/data.csv"]
    crate["@context"] = "https://example.org/other"
    digests = {k: layout.sha256_hex(v) for k, v in files.items() if k != layout.MANIFEST}
    problems = layout.check_crate(crate, digests)
    assert any("@context" in p for p in problems)
    assert any("a/data.csv has no File entity" in p for p in problems)
    assert layout.check_crate([], digests) == [f"{layout.CRATE}: not a JSON object"]


def test_manifest_round_trip_and_malformed_lines() -> None:
    digests = {"b": "0" * 64, "a b/c": "f" * 64}
    assert layout.parse_manifest(layout.make_manifest(digests)) == digests
    with pytest.raises(ValueError, match="line 1"):
        layout.parse_manifest(b"nothex  a\n")
    with pytest.raises(ValueError, match="listed twice"):
        layout.parse_manifest(("0" * 64 + "  a\n").encode() * 2)


# -- compare, rerun spec ------------------------------------------------------------------------------------


def test_compare_tables_and_pixels() -> None:
    assert compare_table(b"a,b\n1,2\n", b"a,b\n1,2\n").ok
    v = compare_table(b"a,b\n1,2\n", b"a,b\n1,2.5\n")
    assert not v.ok and "row 1, column b" in v.detail and "'2.5'" in v.detail
    img = np.zeros((10, 10, 4))
    assert compare_pixels(img, img.copy(), 0.0).detail == "identical pixel by pixel"
    off = img.copy()
    off[0, 0, 0] = 1.0  # one channel of one pixel fully off
    assert not compare_pixels(img, off, 1.0).ok
    assert compare_pixels(img, off, 20.0).ok
    assert not compare_pixels(img, np.zeros((10, 11, 4)), 100.0).ok


def test_rerun_spec_is_a_new_experiment() -> None:
    text = "# a spec\nname: tiny  # the name\nreproduces: none\n"
    new = rerun_spec_text(text, "tiny", "tiny-rerun", "ab" * 32)
    assert "\nname: tiny-rerun\n" in new and new.startswith("# rerun of experiment tiny")
    with pytest.raises(BundleError, match="no top-level 'name: other'"):
        rerun_spec_text(text, "other", "other-rerun", "ab" * 32)
    with pytest.raises(BundleError, match="must match"):
        rerun_spec_text(text, "tiny", "Tiny_Rerun", "ab" * 32)
