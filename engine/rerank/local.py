"""A local cross-encoder from a folder the user provides (`model.onnx` + `tokenizer.json`), on
onnxruntime and `tokenizers` like the local embedder. Nothing is bundled or downloaded.

Each (query, chunk) pair is tokenised as one BERT pair (`[CLS] query [SEP] chunk [SEP]`), cut to
`maxTokens` (longest first, so a long query cannot push the chunk out entirely), and scored in
batches of `batchSize` pairs padded to the batch's longest. The graph's inputs are fed by name
(`input_ids`, `attention_mask`, `token_type_ids` when it has them); its first output is a logit per
pair (`[batch]` or `[batch, 1]`), or two class logits (`[batch, 2]`: the positive class's log-odds).
The budget is checked between batches, so a slow model stops at the next batch.
"""

from __future__ import annotations

import hashlib
import threading
import time
from pathlib import Path
from typing import Any, Sequence

import anyio
import numpy as np

from ..errors import ProviderError, ProviderUnavailableError
from .base import RerankBudgetExceeded

__all__ = ["LocalCrossEncoder", "MODEL_FILE", "TOKENIZER_FILE"]

MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
INSTALL_HINT = "pip install onnxruntime tokenizers"


class LocalCrossEncoder:
    id = "local"
    logits: bool | None = True

    def __init__(
        self, folder: str | Path, *, max_tokens: int = 256, batch_size: int = 16, threads: int | None = None
    ) -> None:
        self.folder = Path(folder).expanduser()
        self.model = self.folder.name
        self.max_tokens = max_tokens
        self.batch_size = max(1, batch_size)
        self._threads = threads
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None
        self._input_names: set[str] = set()
        self.pairs_scored = 0
        self.batches_run = 0

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(f"local:{self.folder.resolve()}".encode()).hexdigest()[:16]

    def check_setup(self) -> None:
        """The folder holds both files (cheap: no load)."""
        for name in (MODEL_FILE, TOKENIZER_FILE):
            if not (self.folder / name).is_file():
                raise ProviderUnavailableError(
                    f"rerank model folder {self.folder} has no {name} (memorySearch.query.rerank.modelPath needs "
                    f"{MODEL_FILE} and {TOKENIZER_FILE} of a cross-encoder exported to ONNX)"
                )

    def load(self) -> None:
        with self._lock:
            if self._session is not None:
                return
            self.check_setup()
            try:
                import onnxruntime as ort  # noqa: PLC0415
                from tokenizers import Tokenizer  # noqa: PLC0415
            except ImportError:
                raise ProviderUnavailableError(
                    f"the local reranker needs onnxruntime and tokenizers: {INSTALL_HINT}"
                ) from None
            try:
                tokenizer = Tokenizer.from_file(str(self.folder / TOKENIZER_FILE))
            except Exception as exc:  # tokenizers raises its own untyped errors
                raise ProviderUnavailableError(f"cannot load tokenizer {self.folder / TOKENIZER_FILE}: {exc}") from None
            tokenizer.enable_truncation(self.max_tokens, strategy="longest_first")
            pad_id = tokenizer.token_to_id("[PAD]")
            tokenizer.enable_padding(pad_id=pad_id if pad_id is not None else 0)
            opts = ort.SessionOptions()
            opts.log_severity_level = 3
            if self._threads:
                opts.intra_op_num_threads = self._threads
            try:
                session = ort.InferenceSession(str(self.folder / MODEL_FILE), sess_options=opts,
                                               providers=["CPUExecutionProvider"])
            except Exception as exc:  # onnxruntime raises its own untyped errors
                raise ProviderUnavailableError(f"cannot load rerank model {self.folder / MODEL_FILE}: {exc}") from None
            self._input_names = {i.name for i in session.get_inputs()}
            if "input_ids" not in self._input_names:
                raise ProviderUnavailableError(
                    f"rerank model {self.folder / MODEL_FILE} has no input_ids input (inputs: "
                    f"{sorted(self._input_names)})"
                )
            self._tokenizer, self._session = tokenizer, session

    def encode(self, query: str, documents: Sequence[str]) -> dict[str, np.ndarray]:
        """The graph's feeds for one batch of pairs (padded to the longest, cut to maxTokens)."""
        encodings = self._tokenizer.encode_batch([(query, d) for d in documents])
        feeds = {
            "input_ids": np.asarray([e.ids for e in encodings], dtype=np.int64),
            "attention_mask": np.asarray([e.attention_mask for e in encodings], dtype=np.int64),
            "token_type_ids": np.asarray([e.type_ids for e in encodings], dtype=np.int64),
        }
        return {k: v for k, v in feeds.items() if k in self._input_names}

    def _logits(self, out: np.ndarray, n: int) -> np.ndarray:
        out = np.asarray(out, dtype=np.float64)
        if out.shape == (n,) or out.shape == (n, 1):
            return out.reshape(n)
        if out.ndim == 2 and out.shape == (n, 2):
            return out[:, 1] - out[:, 0]
        raise ProviderError(
            f"rerank model {self.folder / MODEL_FILE} returned shape {out.shape}; expected ({n},), ({n}, 1) or ({n}, 2)"
        )

    def score_sync(self, query: str, documents: Sequence[str], *, deadline: float | None = None) -> list[float]:
        self.load()
        documents = list(documents)
        scores: list[float] = []
        for start in range(0, len(documents), self.batch_size):
            if deadline is not None and time.monotonic() > deadline:
                raise RerankBudgetExceeded(
                    f"local reranker scored {len(scores)} of {len(documents)} chunks within the budget"
                )
            batch = documents[start : start + self.batch_size]
            out = self._session.run(None, self.encode(query, batch))[0]
            logits = self._logits(out, len(batch))
            if not np.all(np.isfinite(logits)):
                raise ProviderError(f"rerank model {self.folder / MODEL_FILE} returned non-finite scores")
            scores.extend(float(x) for x in logits)
            self.batches_run += 1
        self.pairs_scored += len(documents)
        return scores

    async def score(self, query: str, documents: Sequence[str], *, deadline: float) -> list[float]:
        # Abandoned on cancel (the stage's budget): the thread stops at its next batch check.
        return await anyio.to_thread.run_sync(
            lambda: self.score_sync(query, documents, deadline=deadline), abandon_on_cancel=True
        )

    def status(self) -> dict[str, Any]:
        return {"modelPath": str(self.folder), "loaded": self._session is not None, "maxTokens": self.max_tokens,
                "batchSize": self.batch_size, "pairsScored": self.pairs_scored}

    async def aclose(self) -> None:
        self._session = None
