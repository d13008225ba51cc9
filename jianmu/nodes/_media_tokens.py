"""Tokens an image or audio part costs a model, estimated offline from its size.

A history's images are most of its tokens: a screenshot costs Claude about 1,600 and GPT-4o
about 1,100, where a flat 85 (a low-detail image's cost) let a conversation of screenshots
through a token budget many times over. An image's width and height are read from its first
bytes (PNG, GIF, WebP, JPEG); a part whose size cannot be read counts by its bytes.
"""

from __future__ import annotations

import binascii
import math
import struct

from jianmu.tools.calls import MediaPart

__all__ = ("media_tokens",)

LOW_DETAIL = 85
"""The least an image or audio part counts: a low-detail image's cost at OpenAI."""
_CLAUDE_MOST = 1_600
"""An image's most at Anthropic (scaled to about 1.15 megapixels, a token per 750 pixels)."""
_HEAD_CHARS = 8_192
"""Base64 characters read for a JPEG's size (its frame header follows EXIF and the tables)."""


def media_tokens(part: MediaPart) -> int:
    """An estimate of what ``part`` costs a model: the larger of Anthropic's and OpenAI's
    (high detail) cost of an image of its size, else one by its bytes."""
    size = _dimensions(part.data) if part.kind == "image" else None
    if size is None:
        # unknown: a token per 750 bytes (an audio clip's second, a big image's pixels)
        return min(max(LOW_DETAIL, len(part.data) * 3 // 4 // 750), _CLAUDE_MOST)
    width, height = size
    claude = min(math.ceil(width * height / 750), _CLAUDE_MOST)
    # OpenAI: fit in 2048 x 2048, the short side down to 768, then 170 per 512-pixel tile
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        w, h = w * 2048 / max(w, h), h * 2048 / max(w, h)
    if min(w, h) > 768:
        w, h = w * 768 / min(w, h), h * 768 / min(w, h)
    tiles = math.ceil(w / 512) * math.ceil(h / 512)
    return max(LOW_DETAIL, claude, LOW_DETAIL + 170 * tiles)


def _dimensions(data: str) -> tuple[int, int] | None:
    """An image's width and height from the start of its base64 data; None when unknown."""
    head = data[:_HEAD_CHARS]
    try:
        raw = binascii.a2b_base64(head[:len(head) - len(head) % 4])
    except (binascii.Error, ValueError):
        return None
    found: tuple[int, int] | None = None
    if raw.startswith(b"\x89PNG\r\n\x1a\n") and raw[12:16] == b"IHDR" and len(raw) >= 24:
        found = struct.unpack(">II", raw[16:24])
    elif raw[:6] in (b"GIF87a", b"GIF89a") and len(raw) >= 10:
        found = struct.unpack("<HH", raw[6:10])
    elif raw[:4] == b"RIFF" and raw[8:12] == b"WEBP":
        found = _webp(raw)
    elif raw[:2] == b"\xff\xd8":
        found = _jpeg(raw)
    if found is None or not (0 < found[0] < 1 << 20 and 0 < found[1] < 1 << 20):
        return None  # a header that lies about its size counts by its bytes
    return found


def _webp(raw: bytes) -> tuple[int, int] | None:
    kind = raw[12:16]
    if kind == b"VP8 " and len(raw) >= 30:
        width, height = struct.unpack("<HH", raw[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if kind == b"VP8L" and len(raw) >= 25:
        bits = int.from_bytes(raw[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if kind == b"VP8X" and len(raw) >= 30:
        return (int.from_bytes(raw[24:27], "little") + 1,
                int.from_bytes(raw[27:30], "little") + 1)
    return None


def _jpeg(raw: bytes) -> tuple[int, int] | None:
    """The size in a JPEG's frame header (SOF), found by walking its segments."""
    at = 2
    while at + 9 <= len(raw):
        if raw[at] != 0xFF:
            return None
        marker = raw[at + 1]
        if marker == 0xFF:  # fill bytes before a marker
            at += 1
            continue
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", raw[at + 5:at + 9])
            return width, height
        at += 2 + int.from_bytes(raw[at + 2:at + 4], "big")
    return None
