#!/usr/bin/env python3
"""Counts the pixels of a colour in a PNG (8-bit RGB or RGBA, not interlaced), as Chromium's
--screenshot writes them: in the whole picture, or within the box that the pixels of a second
colour span (a region of the page drawn in a colour of its own).

  png_count.py FILE RRGGBB [WITHIN_RRGGBB]   prints the count
"""
import struct
import sys
import zlib


def pixels(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit(f"{path}: not a PNG")
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or colour not in (2, 6) or interlace:
                sys.exit(f"{path}: only 8-bit RGB or RGBA, not interlaced")
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return width, height, channels, rows


def rgb(text):
    return tuple(int(text[i:i + 2], 16) for i in (0, 2, 4))


def main():
    path, want = sys.argv[1], rgb(sys.argv[2])
    width, height, channels, rows = pixels(path)
    x0, y0, x1, y1 = 0, 0, width, height
    if len(sys.argv) > 3:
        region = rgb(sys.argv[3])
        spots = [(x, y) for y in range(height) for x in range(width)
                 if tuple(rows[y][x * channels:x * channels + 3]) == region]
        if not spots:
            print(0)
            return
        x0, x1 = min(p[0] for p in spots), max(p[0] for p in spots) + 1
        y0, y1 = min(p[1] for p in spots), max(p[1] for p in spots) + 1
    n = 0
    for y in range(max(0, y0), min(height, y1)):
        line = rows[y]
        for x in range(max(0, x0), min(width, x1)):
            if tuple(line[x * channels:x * channels + 3]) == want:
                n += 1
    print(n)


main()
