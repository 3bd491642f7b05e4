"""Image and audio memory files (Gemini embedding 2 only): extensions, MIME sniffing, hashing."""

from __future__ import annotations

import hashlib
import json

__all__ = ["IMAGE_EXTENSIONS", "AUDIO_EXTENSIONS", "extensions_for", "sniff_mime", "modality_of", "multimodal_hash", "label_for",
           "MediaRead", "read_media", "TOO_LARGE"]

# How providers word "this file is too large" (a 413, a token limit): the file is kept with no chunks.
TOO_LARGE = ("413", "too large", "too many tokens", "input limit", "request size")

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".webp", ".gif", ".heic", ".heif")
AUDIO_EXTENSIONS = (".mp3", ".wav", ".ogg", ".opus", ".m4a", ".aac", ".flac")


def extensions_for(modalities: list[str]) -> tuple[str, ...]:
    return (IMAGE_EXTENSIONS if "image" in modalities else ()) + (AUDIO_EXTENSIONS if "audio" in modalities else ())


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
    """sha256 of {path, contentText, mimeType, dataHash}, keys in that order (spec 3.3)."""
    doc = {"path": rel_path, "contentText": label, "mimeType": mime, "dataHash": hashlib.sha256(data).hexdigest()}
    return hashlib.sha256(json.dumps(doc, separators=(",", ":")).encode()).hexdigest()


class MediaRead:
    """An image or audio file read for indexing: its hash, its one chunk's label (the text a hit
    shows) and the bytes and type a multimodal provider embeds."""

    __slots__ = ("hash", "label", "mime", "data")

    def __init__(self, digest: str, label: str, mime: str, data: bytes) -> None:
        self.hash, self.label, self.mime, self.data = digest, label, mime, data


def read_media(f: object, st: object, skipped: list, max_bytes: int) -> MediaRead | None:
    """`f` (a MemoryFile of an image or audio file) as a MediaRead, or None with the reason added
    to `skipped`: over `maxFileBytes`, unreadable, changed while read, or not what its name says."""
    from .discovery import Skipped  # noqa: PLC0415

    rel, modality, size = f.rel_path, f.modality, st.st_size  # type: ignore[attr-defined]
    if size > max_bytes:
        skipped.append(Skipped(rel, f"{modality} file over multimodal.maxFileBytes ({size} > {max_bytes})"))
        return None
    try:
        with open(f.abs_path, "rb") as fh:  # type: ignore[attr-defined]
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        skipped.append(Skipped(rel, f"cannot read: {exc.strerror}"))
        return None
    if len(data) != size:
        skipped.append(Skipped(rel, "changed while being indexed"))
        return None
    mime = sniff_mime(data[:512])
    if mime is None or not mime.startswith(modality):
        skipped.append(Skipped(rel, f"content is not {modality} (sniffed {mime or 'unknown'})"))
        return None
    label = label_for(modality, rel)
    return MediaRead(multimodal_hash(rel, label, mime, data), label, mime, data)

