"""distil_embedder.py --notes: a chunk's error weighed as the questions see it. Needs torch and
transformers (training tools, never memsift dependencies): skipped without them."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="training tools only (pip install torch transformers)")
pytest.importorskip("transformers", reason="training tools only (pip install torch transformers)")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "contrib" / "embedder"))

import distil_embedder  # noqa: E402


def _data(questions: np.ndarray) -> dict:
    chunks = np.eye(4, dtype=np.float32)
    return {"vectors": np.vstack([chunks, questions]),
            "kinds": np.array(["chunk"] * 4 + ["question"] * len(questions))}


def test_the_weights_are_half_plain_half_the_questions_second_moments():
    shared = np.array([[1.0, 0, 0, 0]] * 9 + [[0, 1.0, 0, 0]], dtype=np.float32)  # most questions look one way
    w = distil_embedder.question_weights(_data(shared)).numpy()
    assert np.allclose(w, w.T) and np.trace(w) == pytest.approx(4.0)  # mean eigenvalue 1, as the plain loss
    assert w[0, 0] > w[1, 1] > w[2, 2] == pytest.approx(0.5)  # a direction no question uses: the plain half only

    error = torch.tensor([[1.0, 0, 0, 0]]), torch.tensor([[0, 0, 1.0, 0]])
    target = torch.zeros(1, 4)
    along_questions = distil_embedder.weighted_error(error[0], target, torch.from_numpy(w))
    aside = distil_embedder.weighted_error(error[1], target, torch.from_numpy(w))
    assert along_questions > 4 * aside  # the same error counts more where questions look
    plain = distil_embedder.weighted_error(error[0], target, torch.eye(4))
    assert plain == pytest.approx(1.0)  # with W = I: the squared distance, 2(1 - cosine) for unit vectors


def test_data_without_questions_is_refused():
    with pytest.raises(SystemExit, match="no questions"):
        distil_embedder.question_weights({"vectors": np.eye(4, dtype=np.float32), "kinds": np.array(["chunk"] * 4)})
