"""Test helper: a jitted batch function applied to many rows in fixed-size chunks."""

from __future__ import annotations

import jax
import numpy as np


def chunked(fn, chunk: int, *args):
    """fn over the rows of numpy pytrees `args`, in chunks padded to `chunk` rows.

    Every call sees the same shapes, so `fn` compiles once whatever the number of rows;
    the padding repeats each chunk's first row and is cut from the results.
    """
    n = len(jax.tree.leaves(args)[0])
    outs = []
    for start in range(0, n, chunk):
        rows = min(chunk, n - start)

        def pad(x, start=start, rows=rows):
            x = x[start : start + rows]
            return np.concatenate([x, np.repeat(x[:1], chunk - rows, axis=0)])

        out = jax.device_get(fn(*jax.tree.map(pad, args)))
        outs.append(jax.tree.map(lambda x, rows=rows: x[:rows], out))
    return jax.tree.map(lambda *xs: np.concatenate(xs), *outs)
