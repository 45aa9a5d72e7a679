"""A failed write leaves nothing behind and never damages an earlier IR."""

import os

import pytest

import ir.writer
from ir import IRError, read_ir, write_ir


def _fail_on_second_blob(monkeypatch):
    real = ir.writer._write_chunk
    calls = []

    def flaky(f, chunk):
        calls.append(len(chunk))
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real(f, chunk)

    monkeypatch.setattr(ir.writer, "_write_chunk", flaky)
    return calls


def test_failed_write_keeps_the_earlier_ir_byte_identical(tmp_path, monkeypatch, make_net):
    xml = tmp_path / "model.xml"
    write_ir(make_net(seed=1), xml)
    old_xml, old_bin = xml.read_bytes(), xml.with_suffix(".bin").read_bytes()

    calls = _fail_on_second_blob(monkeypatch)
    with pytest.raises(IRError, match="No space left on device"):
        write_ir(make_net(seed=2), xml)
    assert len(calls) == 2  # it really failed mid-way, after one blob was written

    assert sorted(os.listdir(tmp_path)) == ["model.bin", "model.xml"]  # no temporaries
    assert xml.read_bytes() == old_xml
    assert xml.with_suffix(".bin").read_bytes() == old_bin
    assert read_ir(xml) == make_net(seed=1)


def test_failed_first_write_leaves_no_files(tmp_path, monkeypatch, sample_net):
    _fail_on_second_blob(monkeypatch)
    out = tmp_path / "out"
    with pytest.raises(IRError):
        write_ir(sample_net, out / "model.xml")
    assert os.listdir(out) == []


def test_interrupt_also_cleans_up(tmp_path, monkeypatch, sample_net):
    def interrupted(f, chunk):
        f.write(b"partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(ir.writer, "_write_chunk", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_ir(sample_net, tmp_path / "model.xml")
    assert os.listdir(tmp_path) == []


def test_failed_xml_rename_restores_the_old_bin(tmp_path, monkeypatch, make_net):
    xml = tmp_path / "model.xml"
    write_ir(make_net(seed=1), xml)
    old_xml, old_bin = xml.read_bytes(), xml.with_suffix(".bin").read_bytes()

    real_replace = os.replace

    def replace(src, dst):
        if str(dst).endswith(".xml"):
            raise OSError(5, "Input/output error")
        real_replace(src, dst)

    monkeypatch.setattr(ir.writer.os, "replace", replace)
    with pytest.raises(IRError, match="Input/output error"):
        write_ir(make_net(seed=2), xml)
    monkeypatch.undo()
    assert sorted(os.listdir(tmp_path)) == ["model.bin", "model.xml"]
    assert xml.read_bytes() == old_xml and xml.with_suffix(".bin").read_bytes() == old_bin


def test_output_directory_is_created(tmp_path, sample_net):
    xml = tmp_path / "a" / "b" / "c" / "m.xml"
    write_ir(sample_net, xml)
    assert xml.exists()


def test_uncreatable_output_directory_is_faq_21(tmp_path, sample_net):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(IRError) as info:
        write_ir(sample_net, blocker / "sub" / "m.xml")
    assert info.value.faq == 21
    assert f"Failed to create directory {blocker / 'sub'}" in str(info.value)
    assert "question #21" in str(info.value)
    assert "\n" not in str(info.value)


def test_written_files_get_normal_permissions(tmp_path, sample_net):
    old = os.umask(0o022)
    try:
        write_ir(sample_net, tmp_path / "m.xml")
    finally:
        os.umask(old)
    assert (tmp_path / "m.xml").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "m.bin").stat().st_mode & 0o777 == 0o644
