"""IR files are untrusted: XML bombs, external entities and huge files are refused."""

import pytest

from ir import IRError, read_ir, write_ir

BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE net [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<net batch="1" name="&lol9;" version="2"><layers/><edges/></net>
"""

EXTERNAL_ENTITY = """<?xml version="1.0"?>
<!DOCTYPE net [<!ENTITY secret SYSTEM "file://{path}">]>
<net batch="1" name="x" version="2">
    <layers>
        <layer id="0" name="&secret;" precision="FP32" type="Input">
            <output><port id="0"><dim>1</dim></port></output>
        </layer>
    </layers>
    <edges/>
</net>
"""

EXTERNAL_DTD = """<?xml version="1.0"?>
<!DOCTYPE net SYSTEM "http://example.invalid/ir.dtd">
<net batch="1" name="x" version="2"><layers/><edges/></net>
"""


@pytest.mark.parametrize("kind", ["billion-laughs", "external-entity", "external-dtd"])
def test_dtd_and_entities_are_refused(tmp_path, kind):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET")
    text = {"billion-laughs": BILLION_LAUGHS,
            "external-entity": EXTERNAL_ENTITY.format(path=secret),
            "external-dtd": EXTERNAL_DTD}[kind]
    xml = tmp_path / "evil.xml"
    xml.write_text(text)
    with pytest.raises(IRError) as info:
        read_ir(xml)
    message = str(info.value)
    assert "DTD or entity declaration" in message and "refusing to parse" in message
    assert str(xml) in message
    assert "TOP-SECRET" not in message


def test_oversized_xml_is_refused_before_reading(tmp_path, sample_net):
    xml = tmp_path / "m.xml"
    write_ir(sample_net, xml)
    size = xml.stat().st_size
    assert read_ir(xml, max_xml_bytes=size)
    with pytest.raises(IRError, match=rf"is {size} bytes, more than the limit of {size - 1} bytes.*max_xml_bytes"):
        read_ir(xml, max_xml_bytes=size - 1)


def test_too_many_xml_elements_are_refused_before_parsing(tmp_path, sample_net):
    """A file of tiny elements within max_xml_bytes built a tree 25x its size (48 MiB: 1.2 GiB,
    14 s in the daemon); the elements are counted first. An IR without layers is refused too."""
    xml = tmp_path / "m.xml"
    write_ir(sample_net, xml)
    text = xml.read_text()
    count = text.count("<") - text.count("</")
    assert read_ir(xml, max_xml_elements=count)
    with pytest.raises(IRError, match=rf"about {count} XML elements, more than the limit of {count - 1}"):
        read_ir(xml, max_xml_elements=count - 1)
    empty = tmp_path / "empty.xml"
    empty.write_text('<?xml version="1.0"?>\n<net name="x" version="2" batch="1"><layers/><edges/></net>\n')
    with pytest.raises(IRError, match="holds no <layer>"):
        read_ir(empty)


def test_oversized_bin_is_refused(tmp_path, sample_net):
    xml = tmp_path / "m.xml"
    write_ir(sample_net, xml)
    assert read_ir(xml, max_bin_bytes=448)
    with pytest.raises(IRError, match=r"m\.bin is 448 bytes, more than the limit of 100 bytes.*max_bin_bytes"):
        read_ir(xml, max_bin_bytes=100)
