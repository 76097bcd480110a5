"""Engine-neutral numerics shared by the AI runtime and the kinds' offline fitting (no engine, no kind)."""

from __future__ import annotations

import numpy as np


def softmax(z: np.ndarray, axis: int = -1) -> np.ndarray:
    """Row-wise softmax along `axis`, shifted by the maximum so large logits do not overflow."""
    z = z - z.max(axis=axis, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=axis, keepdims=True)
