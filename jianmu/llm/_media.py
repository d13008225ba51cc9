"""Images and audio of tool messages in the OpenAI and Anthropic request formats."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from jianmu.tools.calls import MediaPart

__all__ = (
    "ANTHROPIC_IMAGE_TYPES",
    "OPENAI_IMAGE_TYPES",
    "anthropic_media_blocks",
    "media_from_anthropic",
    "media_from_parts",
    "openai_image_parts",
    "with_stand_ins",
)

OPENAI_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""Image types OpenAI's chat models read from an ``image_url`` data URL."""
ANTHROPIC_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""Image types an Anthropic ``image`` block takes."""


def with_stand_ins(text: str | None, media: Sequence[MediaPart]) -> str:
    """The text of a message with a one-line stand-in per media part, so that a model always
    knows a part was there (and where), whether or not it can see it."""
    lines = [text] if text else []
    lines.extend(part.describe() for part in media)
    return "\n".join(lines)


def openai_image_parts(media: Iterable[MediaPart]) -> list[dict[str, Any]]:
    """The ``image_url`` parts (data URLs) for the images OpenAI's chat models can read."""
    return [
        {"type": "image_url", "image_url": {"url": part.data_url()}}
        for part in media
        if part.kind == "image" and part.mime_type in OPENAI_IMAGE_TYPES
    ]


def anthropic_media_blocks(media: Iterable[MediaPart]) -> list[dict[str, Any]]:
    """The ``image`` blocks for the media Anthropic can take (audio and other types: none)."""
    return [
        {
            "type": "image",
            "source": {"type": "base64", "media_type": part.mime_type, "data": part.data},
        }
        for part in media
        if part.kind == "image" and part.mime_type in ANTHROPIC_IMAGE_TYPES
    ]


def media_from_anthropic(blocks: Iterable[Any]) -> tuple[list[Any], list[MediaPart]]:
    """Split Anthropic content blocks into the text ones and base64 images."""
    texts: list[Any] = []
    media: list[MediaPart] = []
    for block in blocks:
        source = block.get("source") if isinstance(block, dict) else None
        if isinstance(source, dict) and block.get("type") == "image":
            if source.get("type") != "base64":
                raise ValueError(f"image block {block!r}: only base64 images are supported")
            media.append(MediaPart(
                kind="image", mime_type=str(source.get("media_type")), data=str(source["data"])
            ))
        else:
            texts.append(block)
    return texts, media


def media_from_parts(parts: Iterable[Any]) -> tuple[list[Any], list[MediaPart]]:
    """Split content parts into the others and the images: OpenAI ``image_url`` parts with a
    base64 ``data:`` URL, and Anthropic base64 ``image`` blocks."""
    rest: list[Any] = []
    media: list[MediaPart] = []
    for part in parts:
        url = part.get("image_url") if isinstance(part, dict) else None
        url = url.get("url") if isinstance(url, dict) else url
        if part_type(part) == "image_url" and isinstance(url, str):
            head, sep, data = url.partition(";base64,")
            if not (head.startswith("data:") and sep):
                raise ValueError(f"image part {url[:40]!r}: only base64 data URLs are supported")
            media.append(MediaPart(kind="image", mime_type=head[len("data:"):], data=data))
        elif part_type(part) == "image":
            _texts, found = media_from_anthropic([part])
            media.extend(found)
        else:
            rest.append(part)
    return rest, media


def part_type(part: Any) -> Any:
    """A content part's ``type`` (``None`` for a string)."""
    return part.get("type") if isinstance(part, dict) else None
