"""Category sets of categorical splits: the categories a split sends right, as bitsets.

A categorical split sends a row right when its category is in the split's set, left when
it is not (a category the set's words do not reach, or an invalid one, is not in it), and a
missing value the default way: XGBoost's rule (src/common/categorical.h Decision). A set is
kept as 32-bit words, category c at bit c % 32 of word c // 32, as XGBoost's trees keep
them; trees pack all their nodes' sets into one array of words, a node's words at
node_ptr[node]:node_ptr[node + 1] (none for a numeric split or a leaf).
"""

from __future__ import annotations

import numpy as np

WORD_BITS = 32


def n_words(n_categories: int) -> int:
    """Words of a bitset over n_categories categories (at least one)."""
    return max(1, -(-int(n_categories) // WORD_BITS))


def bitset_of(categories, n_categories: int | None = None) -> np.ndarray:
    """The uint32 bitset with the given categories set (as many words as the largest needs,
    or as n_categories needs)."""
    c = np.asarray(categories, dtype=np.int64)
    size = n_words(n_categories if n_categories is not None else (int(c.max()) + 1 if c.size else 1))
    bits = np.zeros(size, dtype=np.uint32)
    np.bitwise_or.at(bits, c // WORD_BITS, np.left_shift(np.uint32(1), (c % WORD_BITS).astype(np.uint32)))
    return bits


def categories_of(bits) -> np.ndarray:
    """The sorted categories set in a bitset (int32)."""
    bits = np.asarray(bits, dtype=np.uint32)
    hits = (bits[:, None] >> np.arange(WORD_BITS, dtype=np.uint32)[None, :]) & np.uint32(1)
    return np.flatnonzero(hits.ravel()).astype(np.int32)


def in_sets(xp, words, begin, size, values):
    """Whether category values[i] (float or int; truncated toward zero, as XGBoost's AsCat) is
    in the set of words[begin[i]:begin[i] + size[i]]. Negative or out-of-reach values are in
    no set."""
    v = xp.asarray(values)
    valid = v >= 0
    if v.dtype.kind == "f":
        valid &= v < 16777216  # XGBoost's InvalidCat: beyond float32's exact integers
    code = xp.where(valid, v, 0).astype(xp.int64)
    word = code // WORD_BITS
    inside = valid & (word < xp.asarray(size))
    at = xp.where(inside, xp.asarray(begin) + word, 0)
    w = words[at] if words.size else xp.zeros(at.shape, dtype=xp.uint32)
    hit = (w >> (code % WORD_BITS).astype(xp.uint32)) & xp.uint32(1)
    return inside & (hit != 0)


def categorical_left(sets, nodes, values, missing, left):
    """left (the rows' numeric decisions), with the rows at categorical splits sent left when
    their category is not in the split's set (missing values keep their default): sets is
    pack's (node_ptr, words), nodes index its node_ptr (numpy)."""
    node_ptr, words = sets
    begin, size = node_ptr[nodes], node_ptr[nodes + 1] - node_ptr[nodes]
    cat = (size > 0) & ~missing
    if not cat.any():
        return left
    return np.where(cat, ~in_sets(np, words, begin, size, values), left)


def pack(trees, offsets) -> tuple[np.ndarray, np.ndarray] | None:
    """(node_ptr (total nodes + 1,) int64, words uint32) of the trees' category sets, their
    nodes numbered as the trees' packed nodes (tree t's node j is offsets[t] + j); None when no
    tree has a categorical split."""
    if not any(t.categories for t in trees):
        return None
    total = int(offsets[-1])
    sizes = np.zeros(total, dtype=np.int64)
    chunks = []
    for t, tree in enumerate(trees):
        for node, cats in sorted(tree.categories.items()):
            bits = bitset_of(cats)
            sizes[int(offsets[t]) + node] = bits.size
            chunks.append((int(offsets[t]) + node, bits))
    node_ptr = np.zeros(total + 1, dtype=np.int64)
    np.cumsum(sizes, out=node_ptr[1:])
    words = np.zeros(int(node_ptr[-1]), dtype=np.uint32)
    for g, bits in chunks:
        words[node_ptr[g] : node_ptr[g] + bits.size] = bits
    return node_ptr, words


def counted(sets) -> tuple[np.ndarray, np.ndarray]:
    """(at, counted) of pack's (node_ptr, words): the sets each preceded by its word count
    (uint32, [n_words, words...] a set, in node order: the form the CUDA walks read,
    kernels/predict.cu and kernels/shap.cu), and each node's offset of its set in them (int64,
    -1 for a node without one)."""
    node_ptr, words = (np.asarray(a) for a in sets)
    sizes = np.diff(node_ptr)
    cat = np.flatnonzero(sizes > 0)
    # Set j (of node cat[j]) starts at node_ptr[cat[j]] + j: j counts before it.
    start = node_ptr[cat] + np.arange(cat.size)
    out = np.zeros(words.size + cat.size, dtype=np.uint32)
    out[start] = sizes[cat]
    out[np.arange(words.size) + np.repeat(np.arange(1, cat.size + 1), sizes[cat])] = words
    at = np.full(sizes.size, -1, dtype=np.int64)
    at[cat] = start
    return at, out


def pack_sets(sets) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(begin, size, words) of a list of category sets (None for a numeric split, size 0)."""
    bitsets = [None if s is None else bitset_of(s) for s in sets]
    size = np.array([0 if b is None else b.size for b in bitsets], dtype=np.int64)
    begin = np.zeros(size.size, dtype=np.int64)
    if size.size:
        begin[1:] = np.cumsum(size)[:-1]
    words = np.concatenate([b for b in bitsets if b is not None] or [np.zeros(0, np.uint32)]).astype(np.uint32)
    return begin, size, words
