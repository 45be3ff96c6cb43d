"""Documents the tests make themselves: PDFs with known text on known pages, two columns, a form, a
password, image-only pages, Chinese; the Chinese articles in tests/data/zh were written for the project.

PDFs are written by hand (objects, a cross-reference table, content streams with the standard Helvetica
font), so every test knows exactly which text is on which page. Chinese in a PDF uses a Type0 font with
Identity-H codes (the code of each glyph is its Unicode value) and a ToUnicode map, so the text layer reads
back as written; no font is embedded (viewers draw boxes; the text layer is what the appliance reads).
"""

from __future__ import annotations

import textwrap
import zlib
from io import BytesIO
from pathlib import Path

import pypdf

DATA = Path(__file__).resolve().parent / "data"
ZH = DATA / "zh"
CHINESE_ARTICLES = ("rpc-deployment.txt", "cooling-and-pcie.txt", "document-search.txt")
HELVETICA = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"


def chinese(name: str = "rpc-deployment.txt") -> str:
    return (ZH / name).read_text(encoding="utf-8")


def all_chinese() -> str:
    return "\n\n".join(chinese(name) for name in CHINESE_ARTICLES)


def chinese_prose() -> str:
    """The articles' paragraphs without their headings: one long run of prose."""
    return "\n\n".join(p for p in all_chinese().split("\n\n") if not p.startswith("#"))


def long_text(pages: int) -> str:
    """An English text of `pages` form-feed separated pages (about 2,500 characters each)."""
    sentences = [
        "The card agent on page {n} reports its temperature, its load and its memory every second.",
        "When a card stops answering, the answer being written fails and names the card.",
        "The launcher restarts what exits, and the host loads the model again before it serves.",
        "Layers are split in proportion to the free memory of each card, the last card holds the output.",
    ]
    return "\f".join(" ".join(s.format(n=n) for s in sentences * 7) for n in range(1, pages + 1))


class _Pdf:
    """Numbered objects in, a valid PDF file out."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    def add(self, body: bytes) -> int:
        self.bodies.append(body)
        return len(self.bodies)

    def reserve(self) -> int:
        return self.add(b"null")

    def set(self, number: int, body: bytes) -> None:
        self.bodies[number - 1] = body

    def stream(self, data: bytes, entries: bytes = b"", *, compress: bool = True) -> int:
        if compress:
            data, entries = zlib.compress(data, 9), entries + b" /Filter /FlateDecode"
        return self.add(b"<< %s /Length %d >>\nstream\n%s\nendstream" % (entries, len(data), data))

    def write(self, root: int) -> bytes:
        out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
        offsets = []
        for number, body in enumerate(self.bodies, 1):
            offsets.append(len(out))
            out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
        xref = len(out)
        out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(self.bodies) + 1)
        out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
        out += b"trailer\n<< /Size %d /Root %d 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(self.bodies) + 1, root, xref)
        return bytes(out)


def _literal(text: str) -> bytes:
    escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
    return b"(" + escaped.encode("cp1252") + b")"


def text_lines(lines: list[str], *, x: int = 72, y: int = 740, size: int = 11, leading: int = 15) -> bytes:
    """A content stream drawing `lines` top-down from (x, y) in Helvetica."""
    body = b"\n".join(_literal(line) + b" Tj T*" for line in lines)
    return b"BT /F1 %d Tf %d TL %d %d Td\n%s\nET\n" % (size, leading, x, y, body)


def wrapped(text: str, *, width: int = 80) -> list[str]:
    """Paragraphs (blank-line separated) wrapped to lines, a blank line between paragraphs."""
    lines: list[str] = []
    for paragraph in text.strip().split("\n\n"):
        lines += [*textwrap.wrap(" ".join(paragraph.split()), width), ""]
    return lines[:-1]


def pdf(
    pages: list[bytes],
    *,
    images: dict[int, bytes] | None = None,
    form: list[tuple[str, str]] | None = None,
    cjk: bool = False,
) -> bytes:
    """A PDF whose page i draws content stream `pages[i]`.

    `images`: page index -> an 8-bit grey image (64 x 64 bytes), drawn as /Im1 on that page.
    `form`: (field name, value) text fields in an AcroForm on the first page.
    `cjk`: the pages may also use /F2, a Chinese font whose codes are Unicode values (see `chinese_lines`).
    """
    doc = _Pdf()
    catalog, tree = doc.reserve(), doc.reserve()
    fonts = b"/F1 %d 0 R" % doc.add(HELVETICA)
    if cjk:
        fonts += b" /F2 %d 0 R" % _cjk_font(doc)
    kids, fields = [], []
    for index, content in enumerate(pages):
        xobjects = b""
        if images and index in images:
            image = doc.stream(
                images[index],
                b"/Type /XObject /Subtype /Image /Width 64 /Height 64 /ColorSpace /DeviceGray /BitsPerComponent 8",
                compress=False,
            )
            xobjects = b" /XObject << /Im1 %d 0 R >>" % image
        page = doc.reserve()
        annots = b""
        if form and index == 0:
            fields = [_field(doc, page, name, value, n) for n, (name, value) in enumerate(form)]
            annots = b" /Annots [%s]" % b" ".join(b"%d 0 R" % f for f in fields)
        contents = doc.stream(content)
        doc.set(
            page,
            b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
            b"/Resources << /Font << %s >>%s >>%s >>" % (tree, contents, fonts, xobjects, annots),
        )
        kids.append(page)
    doc.set(tree, b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % k for k in kids), len(kids)))
    acroform = b" /AcroForm << /Fields [%s] >>" % b" ".join(b"%d 0 R" % f for f in fields) if fields else b""
    doc.set(catalog, b"<< /Type /Catalog /Pages %d 0 R%s >>" % (tree, acroform))
    return doc.write(catalog)


def _field(doc: _Pdf, page: int, name: str, value: str, index: int) -> int:
    top = 300 - 40 * index
    return doc.add(
        b"<< /Type /Annot /Subtype /Widget /FT /Tx /T %s /V %s /Rect [200 %d 500 %d] /P %d 0 R "
        b"/DA (/Helv 10 Tf 0 g) >>" % (_literal(name), _literal(value), top, top + 20, page)
    )


def _cjk_font(doc: _Pdf) -> int:
    ranges = [(0x20, 0x7E), (0x3000, 0x303F), (0x4E00, 0x9FFF), (0xFF00, 0xFFEF), (0x2010, 0x206F)]
    cmap = (
        b"/CIDInit /ProcSet findresource begin 12 dict begin begincmap /CMapName /Quartet-UCS def "
        b"/CMapType 2 def 1 begincodespacerange <0000> <FFFF> endcodespacerange\n%d beginbfrange\n%s\n"
        b"endbfrange endcmap CMapName currentdict /CMap defineresource pop end end"
        % (len(ranges), b"\n".join(b"<%04X> <%04X> <%04X>" % (a, b, a) for a, b in ranges))
    )
    descriptor = doc.add(
        b"<< /Type /FontDescriptor /FontName /STSong-Light /Flags 6 /FontBBox [-25 -254 1000 880] "
        b"/ItalicAngle 0 /Ascent 880 /Descent -120 /CapHeight 880 /StemV 93 >>"
    )
    cid = doc.add(
        b"<< /Type /Font /Subtype /CIDFontType0 /BaseFont /STSong-Light /CIDSystemInfo << /Registry "
        b"(Adobe) /Ordering (Identity) /Supplement 0 >> /FontDescriptor %d 0 R /DW 1000 >>" % descriptor
    )
    return doc.add(
        b"<< /Type /Font /Subtype /Type0 /BaseFont /STSong-Light /Encoding /Identity-H "
        b"/DescendantFonts [%d 0 R] /ToUnicode %d 0 R >>" % (cid, doc.stream(cmap))
    )


def chinese_lines(lines: list[str], *, x: int = 72, y: int = 740, size: int = 12) -> bytes:
    """A content stream drawing Chinese `lines` with /F2 (two-byte codes = Unicode values)."""
    body = b"\n".join(b"<%s> Tj T*" % line.encode("utf-16-be").hex().upper().encode() for line in lines)
    return b"BT /F2 %d Tf %d TL %d %d Td\n%s\nET\n" % (size, size + 6, x, y, body)


def two_columns(left: list[str], right: list[str], *, heading: str = "") -> bytes:
    """One page set in two columns, drawn column after column like a typesetter does."""
    top = text_lines([heading], size=14) if heading else b""
    return top + text_lines(left, x=56, y=700, size=9, leading=12) + text_lines(right, x=316, y=700, size=9, leading=12)


def grey_image(seed: int = 1) -> bytes:
    """64 x 64 grey pixels: a scanned-looking pattern with black (NUL) pixels in it."""
    return bytes(0 if (x * y + seed) % 7 == 0 else (x * 13 + y * 29 + seed) % 256 for y in range(64) for x in range(64))


def image_page() -> bytes:
    return b"q 400 0 0 400 100 200 cm /Im1 Do Q\n"


def encrypted(data: bytes, password: str) -> bytes:
    """`data` (a PDF) locked with `password`, RC4-128 as older office suites write it."""
    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(BytesIO(data)))
    writer.encrypt(user_password=password, owner_password=password + "-owner", algorithm="RC4-128")
    out = BytesIO()
    writer.write(out)
    return out.getvalue()


def broken_page_tree() -> bytes:
    """A well-formed file whose page tree has a number where the list of pages should be: unreadable, like
    real PDFs whose object tables are damaged."""
    doc = _Pdf()
    catalog, tree = doc.reserve(), doc.reserve()
    doc.set(tree, b"<< /Type /Pages /Kids 7 /Count 1 >>")
    doc.set(catalog, b"<< /Type /Catalog /Pages %d 0 R >>" % tree)
    return doc.write(catalog)
