"""Just enough of a PDF reader to measure what camera-ready checkers measure in the figures that
`cir_core.figures` writes (matplotlib's PDF backend: uncompressed object dictionaries, Flate
content streams, one page): the page size, the font size every piece of text is set at (its
`Tf` size times the scale of the text and graphics matrices in force), every image's pixels per
inch as placed on the page, and the fonts' subtypes. No dependency: the operators are read with
a small tokenizer (numbers, names, strings, arrays, dictionaries, operators)."""
from __future__ import annotations

import math
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

_TOKEN = re.compile(rb"""
    (?P<ws>\s+|%[^\n]*)
  | (?P<str>\()
  | (?P<hex><[0-9A-Fa-f\s]*>)
  | (?P<dict><<|>>)
  | (?P<arr>[\[\]])
  | (?P<name>/[^\s/\[\]()<>{}%]*)
  | (?P<num>[+-]?(?:\d+\.?\d*|\.\d+))
  | (?P<op>[A-Za-z'"*]+)
""", re.X)


@dataclass
class Pdf:
    objects: dict[int, bytes]  # object number -> its dictionary text
    streams: dict[int, bytes]  # object number -> its decoded stream

    @classmethod
    def read(cls, path: str | Path) -> "Pdf":
        raw = Path(path).read_bytes()
        starts = [(int(m.group(1)), m.end()) for m in re.finditer(rb"(?m)^(\d+) 0 obj\s*", raw)]
        objects, streams, lengths = {}, {}, {}
        for num, at in starts:
            end = raw.index(b"endobj", at)
            body = raw[at:end]
            s = re.search(rb">>\s*stream\r?\n", body)
            objects[num] = body[:s.start() + 2] if s else body.strip()
            if s:
                lengths[num] = (at + s.end(), body[:s.start() + 2])
        for num, (data_at, d) in lengths.items():
            direct = re.search(rb"/Length (\d+)(?!\d| \d+ R)", d)
            n = int(direct.group(1)) if direct else \
                int(objects[int(re.search(rb"/Length (\d+) 0 R", d).group(1))].split()[0])
            data = raw[data_at:data_at + n]
            streams[num] = zlib.decompress(data) if b"/FlateDecode" in d else data
        return cls(objects, streams)

    def page(self) -> tuple[bytes, int]:
        """(the page dictionary, its content stream's object number)."""
        d = next(d for d in self.objects.values() if re.search(rb"/Type /Page\b", d))
        return d, int(re.search(rb"/Contents (\d+) 0 R", d).group(1))

    def page_size(self) -> tuple[float, float]:
        """(width, height) in points (1/72 in)."""
        d, _ = self.page()
        x0, y0, x1, y1 = map(float, re.search(rb"/MediaBox \[\s*([^\]]+)\]", d).group(1).split())
        return x1 - x0, y1 - y0

    def xobjects(self) -> dict[str, int]:
        """The page's XObject names -> object numbers (images, and matplotlib's markers)."""
        d, _ = self.page()
        res = int(re.search(rb"/Resources (\d+) 0 R", d).group(1))
        xo = int(re.search(rb"/XObject (\d+) 0 R", self.objects[res]).group(1))
        return {n.decode(): int(o) for n, o in re.findall(rb"/([^\s/<>]+) (\d+) 0 R", self.objects[xo])}

    def fonts(self) -> list[bytes]:
        """Every font dictionary's /Subtype (e.g. b'Type0', b'CIDFontType2', b'TrueType', b'Type3')."""
        return [m.group(1) for d in self.objects.values() if re.search(rb"/Type /Font\b", d)
                for m in [re.search(rb"/Subtype /(\w+)", d)] if m]

    def run(self, stream: int | None = None):
        """The page's operators with their operands, the graphics state tracked: yields (op,
        operands, ctm, tm) with the matrices as 6-tuples."""
        _, content = self.page()
        data = self.streams[content if stream is None else stream]
        ctm, tm, stack, ops = (1, 0, 0, 1, 0, 0), (1, 0, 0, 1, 0, 0), [], []
        for kind, value in _tokens(data):
            if kind != "op":
                ops.append(value)
                continue
            if value == "q":
                stack.append(ctm)
            elif value == "Q":
                ctm = stack.pop()
            elif value == "cm":
                ctm = _mul(tuple(map(float, ops[-6:])), ctm)
            elif value == "BT":
                tm = (1, 0, 0, 1, 0, 0)
            elif value == "Tm":
                tm = tuple(map(float, ops[-6:]))
            elif value == "Td":
                tm = _mul((1, 0, 0, 1, float(ops[-2]), float(ops[-1])), tm)
            yield value, ops, ctm, tm
            ops = []

    def text_sizes(self) -> list[float]:
        """The size in points of every text shown (Tj, TJ, ', ")."""
        sizes, size = [], None
        for op, ops, ctm, tm in self.run():
            if op == "Tf":
                size = float(ops[-1])
            elif op in ("Tj", "TJ", "'", '"') and size is not None:
                m = _mul(tm, ctm)
                sizes.append(size * math.sqrt(abs(m[0] * m[3] - m[1] * m[2])))
        return sizes

    def image_ppi(self) -> list[float]:
        """Pixels per inch of every image drawn on the page (its width in pixels over its width on
        the page), the lower of the two axes."""
        names = self.xobjects()
        out = []
        for op, ops, ctm, _ in self.run():
            if op != "Do":
                continue
            d = self.objects[names[ops[-1].lstrip("/")]]
            if b"/Subtype /Image" not in d:
                continue
            w = int(re.search(rb"/Width (\d+)", d).group(1))
            h = int(re.search(rb"/Height (\d+)", d).group(1))
            on_page_w, on_page_h = math.hypot(ctm[0], ctm[1]), math.hypot(ctm[2], ctm[3])  # points
            out.append(min(w / (on_page_w / 72), h / (on_page_h / 72)))
        return out


def _mul(a, b):
    """The product of two PDF matrices [a b c d e f] (row vectors: a then b)."""
    return (a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3],
            a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3],
            a[4] * b[0] + a[5] * b[2] + b[4], a[4] * b[1] + a[5] * b[3] + b[5])


def _tokens(data: bytes):
    """(kind, value) of each token; strings, arrays and dictionaries come back whole as 'obj'."""
    i, depth, n = 0, 0, len(data)
    while i < n:
        m = _TOKEN.match(data, i)
        if m is None:
            i += 1
            continue
        kind = m.lastgroup
        if kind == "ws":
            i = m.end()
        elif kind == "str":  # a literal string: balanced parentheses, backslash escapes
            j, level = i + 1, 1
            while j < n and level:
                c = data[j:j + 1]
                if c == b"\\":
                    j += 2
                    continue
                level += (c == b"(") - (c == b")")
                j += 1
            if depth == 0:
                yield "obj", data[i:j]
            i = j
        elif kind in ("arr", "dict"):
            tok = m.group()
            depth += 1 if tok in (b"[", b"<<") else -1
            if depth == 0 and tok in (b"]", b">>"):
                yield "obj", tok
            i = m.end()
        else:
            if depth == 0:
                yield kind, m.group().decode("latin-1")
            i = m.end()
