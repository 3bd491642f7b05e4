"""Image and audio memory files (Gemini embedding 2 only): extensions, MIME sniffing, hashing."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection
from typing import Any

__all__ = [
    "IMAGE_EXTENSIONS",
    "AUDIO_EXTENSIONS",
    "extensions_for",
    "indexed_media",
    "sniff_mime",
    "modality_of",
    "multimodal_hash",
    "label_for",
    "TOO_LARGE",
]

# How providers word "this file is too large" (a 413, a token limit): the file is kept with no chunks.
TOO_LARGE = ("413", "too large", "too many tokens", "input limit", "request size")

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".webp", ".gif", ".heic", ".heif")
AUDIO_EXTENSIONS = (".mp3", ".wav", ".ogg", ".opus", ".m4a", ".aac", ".flac")


def extensions_for(modalities: Collection[str] | None) -> tuple[str, ...]:
    modalities = modalities or ()
    return (IMAGE_EXTENSIONS if "image" in modalities else ()) + (AUDIO_EXTENSIONS if "audio" in modalities else ())


def indexed_media(multimodal: Any, provider_embeds_media: bool) -> tuple[str, ...]:
    """The image and audio extensions a sync indexes in extra paths: those of `multimodal.modalities`
    when it is enabled and the provider embeds such files, else none."""
    return extensions_for(multimodal.modalities) if (multimodal.enabled and provider_embeds_media) else ()


def modality_of(name: str) -> str | None:
    lower = name.lower()
    if lower.endswith(IMAGE_EXTENSIONS):
        return "image"
    if lower.endswith(AUDIO_EXTENSIONS):
        return "audio"
    return None


def sniff_mime(head: bytes) -> str | None:
    """The MIME type from a file's first bytes (magic numbers), or None."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return "audio/wav"
    if head[4:8] == b"ftyp":
        brand = head[8:12]
        if brand in (b"heic", b"heix", b"hevc", b"heim", b"heis"):
            return "image/heic"
        if brand in (b"mif1", b"msf1", b"heif"):
            return "image/heif"
        if brand in (b"M4A ", b"M4B ", b"mp42", b"isom"):
            return "audio/mp4"
    if head.startswith(b"OggS"):
        return "audio/opus" if b"OpusHead" in head else "audio/ogg"
    if head.startswith(b"fLaC"):
        return "audio/flac"
    if head.startswith(b"ID3") or head[:2] in (b"\xff\xfb", b"\xff\xf3", b"\xff\xf2"):
        return "audio/mpeg"
    if head[:2] in (b"\xff\xf1", b"\xff\xf9"):
        return "audio/aac"
    return None


def label_for(modality: str, rel_path: str) -> str:
    return f"{'Image' if modality == 'image' else 'Audio'} file: {rel_path}"


def multimodal_hash(rel_path: str, label: str, mime: str, data: bytes) -> str:
    """sha256 of {path, contentText, mimeType, dataHash}, keys in that order (as OpenClaw does; docs/parity.md)."""
    doc = {"path": rel_path, "contentText": label, "mimeType": mime, "dataHash": hashlib.sha256(data).hexdigest()}
    return hashlib.sha256(json.dumps(doc, separators=(",", ":")).encode()).hexdigest()
