"""Record layouts, kernel arguments and constants shared by the Python code and the CUDA kernels, declared once.

Every struct, constant and buffer layout the kernels share with Python is declared here and
emitted into kernels/layouts.cuh, which the kernels include: never restated by hand. The
header is generated (``python -c "import daskgb.layouts as l; l.write_header()"``) and committed;
tests/stages/test_layouts.py checks that it is current, that a C++ compiler lays every struct
out at this module's offsets (static_asserts in the header), and on a GPU that the device does.

A struct is a numpy structured dtype with C's natural alignment (np.dtype(..., align=True)),
each field's C type beside it; a pointer field holds a device address (uint64). A kernel
takes a struct by value: kernel_args() packs one for a launch.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

# --------------------------------------------------------------------------- constants
# Rows of a partition tile (a block of kernels/partition.cu).
PARTITION_TILE_ROWS = 4096
# A split must improve the loss by more than this to be applied (XGBoost's kRtEps).
RT_EPS = 1e-6
# The deepest tree growth/device.py grows: a level's splits fit MAX_LEVEL_SPLITS.
MAX_DEVICE_DEPTH = 12
# The most leaves a lossguide tree grown on the device may have (growth/device_lossguide.py):
# its histograms are kept one per open leaf, and each expansion's launches are queued.
MAX_DEVICE_LEAVES = 4096
MAX_LEVEL_SPLITS = 2 ** (MAX_DEVICE_DEPTH - 1)
# Slots a histogram thread reads from one window of three words (kernels/histogram.cu).
WINDOW_SLOTS = 8
# Threads of a split-evaluation block (kernels/split.cu).
SPLIT_THREADS = 256
# Candidate thresholds a gradient-based sampling step tries (sampling/__init__.py).
MVS_CANDIDATES = 64
# The most categories a partition-split feature may have for kernels/categorical.cu, whose
# block sorts them in shared memory (8 bytes each: 128 KiB, within the 227 KiB a Hopper block
# may take). A wider feature's splits are split/categorical.py's array code, on host levels.
MAX_SORTED_CATEGORIES = 16384
# A device-grown tree's words (TREE_FIELDS below): the first row of its category sets.
TREE_CATEGORY_ROW = 13

# (C name, C type, value, what it is), in the header's order.
CONSTANTS = [
    ("kPartitionTileRows", "int", PARTITION_TILE_ROWS, "rows of a partition tile"),
    ("kRtEps", "double", RT_EPS, "a split's loss change must exceed it (split/rules.py RT_EPS)"),
    ("kMaxSplits", "int", MAX_LEVEL_SPLITS, "splits of one level a device-grown tree may make"),
    ("kWindowSlots", "unsigned", WINDOW_SLOTS, "slots a histogram thread reads from one window of words"),
    ("kSplitThreads", "int", SPLIT_THREADS, "threads of a split-evaluation block"),
    ("kMaxCandidates", "int", MVS_CANDIDATES, "candidate thresholds of a sampling step"),
    ("kCategoryRow", "int", TREE_CATEGORY_ROW, "a device-grown tree's first row of category-set words"),
]

# --------------------------------------------------------------------------- structs
_NUMPY_OF_C = {
    "double": "<f8", "float": "<f4", "long long": "<i8", "unsigned long long": "<u8", "int": "<i4",
    "unsigned": "<u4", "int32_t": "<i4", "uint32_t": "<u4", "int8_t": "<i1", "uint8_t": "<u1",
}


@dataclass(frozen=True)
class Struct:
    """A C struct and its numpy twin: (field, C type) pairs in order; a C type ending in "*"
    is a device pointer (uint64 in numpy)."""

    name: str
    doc: str
    fields: tuple

    @cached_property
    def dtype(self) -> np.dtype:
        return np.dtype([(f, "<u8" if c.endswith("*") else _NUMPY_OF_C[c]) for f, c in self.fields], align=True)

    @cached_property
    def raw_dtype(self) -> np.dtype:
        """The struct's bytes, without fields: how kernel_args hands it to CuPy."""
        return np.dtype((np.void, self.dtype.itemsize))

    @cached_property
    def packing(self) -> tuple:
        """(field, kind) pairs: kind 0 a value, 1 a pointer (an array's address), 2 padding (zero)."""
        return tuple((f, 2 if f.startswith("_") else 1 if c.endswith("*") else 0) for f, c in self.fields)

    def c_declaration(self) -> str:
        body = "".join(f"  {c} {f};\n" for f, c in self.fields)
        return (f"// {self.doc}\nstruct {self.name} {{\n{body}}};\n"
                f"static_assert(sizeof({self.name}) == {self.dtype.itemsize}, \"{self.name}: size\");\n")

    def c_offset_checks(self) -> str:
        d = self.dtype
        return "".join(f"static_assert(__builtin_offsetof({self.name}, {f}) == {d.fields[f][1]}, "
                       f"\"{self.name}.{f}: offset\");\n" for f, _ in self.fields)


# The best split of one node, as split evaluation returns it (split/reference.py, split.cu).
#   left_* / right_*: gradient sums of the two children (double, as XGBoost's GradStats)
#   gain:          loss change of the split (float32; <= 0 means no split was found)
#   threshold:     raw-value threshold; fvalue < threshold goes left
#   feature:       split feature, -1 when the node has no valid split
#   bin:           last feature-local bin that goes left (-1: only missing goes left)
#   default_left:  1 when missing values go left
#   categorical:   1 for a split of a categorical feature: the categories in its set go right
#                  (category_sets.py), the others and invalid ones left; bin -1, threshold 0
SPLIT_RECORD = Struct("SplitRecord", "the best split of one node (SPLIT_DTYPE)", (
    ("left_grad", "double"), ("left_hess", "double"), ("right_grad", "double"), ("right_hess", "double"),
    ("gain", "float"), ("threshold", "float"), ("feature", "int32_t"), ("bin", "int32_t"),
    ("default_left", "int32_t"), ("categorical", "int32_t")))

# One node of a tree ready for prediction. Leaves have left == -1 and hold value.
#   left / right: child node ids within the tree (-1 for a leaf); feature: split feature;
#   default_left: 1 when missing values go left; threshold: fvalue < threshold goes left;
#   value: leaf value (already scaled by the learning rate)
PREDICT_NODE = Struct("PredictNode", "one node of a tree for prediction (PREDICT_NODE_DTYPE)", (
    ("left", "int32_t"), ("right", "int32_t"), ("feature", "int32_t"), ("default_left", "int32_t"),
    ("threshold", "float"), ("value", "float")))

# One split candidate of kernels/split.cu: its loss change, where it lies in the visiting
# order (forward bin b: b; backward bin b: n_bins + (n_bins - 1 - b)) and its children's sums.
CANDIDATE = Struct("Candidate", "a split candidate of split.cu (blocks park theirs in global memory)", (
    ("loss", "float"), ("feature", "int"), ("order", "int"),
    ("left_g", "long long"), ("left_h", "long long"), ("right_g", "long long"), ("right_h", "long long")))

# One ELLPACK matrix as the kernels read it (ellpack/layout.py says the layouts).
ELLPACK_VIEW = Struct("EllpackView", "an ELLPACK matrix as kernels read it (ellpack/cuda.py ellpack_view)", (
    ("words", "const uint32_t*"), ("ptrs", "const int32_t*"), ("n_words", "unsigned long long"),
    ("bits", "int"), ("row_stride", "int"), ("null_symbol", "uint32_t"), ("n_features", "int")))

# split/rules.py's SplitParams (float32 values, promoted to double where they meet sums) and
# the learning rate, as the split and growth kernels read them.
SPLIT_PARAMS = Struct("SplitParams", "the split rules' parameters and the learning rate (split/cuda.py)", (
    ("reg_lambda", "double"), ("reg_alpha", "double"), ("min_child_weight", "double"),
    ("max_delta_step", "double"), ("min_split_loss", "float"), ("eta", "float")))

# build_histogram's inputs besides the matrix (kernels/histogram.cu says each).
HISTOGRAM_ARGS = Struct("HistogramArgs", "a histogram launch's rows, gradients, tiles and output", (
    ("ridx", "const uint32_t*"), ("gpair", "const float2*"), ("inv_scale", "const double*"),
    ("tiles", "const long long*"), ("segs", "const long long*"), ("groups", "const int32_t*"),
    ("hist", "long long*"), ("tile_rows", "long long"), ("total_bins", "int"), ("threads_per_row", "int"),
    ("window", "int")))

# evaluate_splits' inputs (kernels/split.cu says each).
SPLIT_INPUTS = Struct("SplitInputs", "a split launch's histograms, sums, cuts and feature masks", (
    ("hist", "const long long*"), ("parent", "const long long*"), ("ptrs", "const int32_t*"),
    ("cut_values", "const float*"), ("min_values", "const float*"), ("feature_mask", "const uint8_t*"),
    ("categorical", "const uint8_t*"), ("scale", "const double*"), ("k_live", "const long long*"), ("total_bins", "int"), ("n_features", "int"),
    ("n_cut_values", "int"), ("mask_stride", "int"), ("k_static", "int")))

# evaluate_splits' outputs and scratch (kernels/split.cu says each).
SPLIT_OUTPUTS = Struct("SplitOutputs", "a split launch's records, children's sums and scratch", (
    ("partial", "Candidate*"), ("counters", "unsigned*"), ("records", "SplitRecord*"), ("left", "long long*"),
    ("right", "long long*")))

# The categorical features' part of a split launch (kernels/categorical.cu says each).
CATEGORICAL_ARGS = Struct("CategoricalArgs", "a split launch's categorical features, their candidates and sets", (
    ("features", "const int32_t*"), ("candidates", "Candidate*"), ("sets", "uint32_t*"), ("node_sets", "uint32_t*"),
    ("n_categorical", "int"), ("set_words", "int"), ("max_cat_to_onehot", "int"), ("max_cat_threshold", "int"),
    ("sort_size", "int")))

# A device-grown tree's buffers (kernels/growth.cu says each).
TREE_BUFFERS = Struct("TreeBuffers", "a device-grown tree's words, state, segments and launch inputs", (
    ("tree", "int*"), ("state", "long long*"), ("segs", "long long*"), ("part_info", "long long*"),
    ("child_info", "long long*"), ("hist_tiles", "long long*"), ("category_sets", "uint32_t*"),
    ("tile_rows", "long long"), ("cap", "int"), ("part_stride", "int"), ("category_words", "int")))

STRUCTS = (SPLIT_RECORD, PREDICT_NODE, CANDIDATE, ELLPACK_VIEW, SPLIT_PARAMS, HISTOGRAM_ARGS, SPLIT_INPUTS,
           SPLIT_OUTPUTS, CATEGORICAL_ARGS, TREE_BUFFERS)

SPLIT_DTYPE = SPLIT_RECORD.dtype
PREDICT_NODE_DTYPE = PREDICT_NODE.dtype

# --------------------------------------------------------------------------- buffer layouts
# A device-grown tree's words (growth/device.py): one row of `cap` 32-bit words per field, in
# this order (floats as their bits), then one row whose first word is the number of nodes;
# then, where the tree may split on categorical features, W rows of category-set words
# (from row TREE_CATEGORY_ROW): word w of node n's set (category_sets.py, the categories that go
# right) is row TREE_CATEGORY_ROW + w, column n. A split on a categorical feature is always a
# categorical split, and its set is never empty; other nodes' words are zero.
# tree.py's FIELDS gives each field's type.
TREE_FIELDS = ("left", "right", "parent", "feature", "bin", "threshold", "default_left", "value", "base_weight",
               "gain", "cover", "depth")
assert TREE_CATEGORY_ROW == len(TREE_FIELDS) + 1

# A device-grown tree's state (int64): nodes in the tree; candidates of the level (the nodes
# evaluated, with consecutive ids); the first candidate's id; splits made by the level.
GROWTH_STATE = ("nodes", "candidates", "first_candidate", "splits")

# A lossguide tree grown on the device (int64, beside GROWTH_STATE): its leaves; whether it is
# done; the first node and the number of nodes the last evaluation scored (0, 1 or 2), which
# the next expansion files under their node ids; histogram slots in use.
LOSSGUIDE_STATE = ("leaves", "done", "evaluated_first", "evaluated_count", "slots")


_NO_VALUES = np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class StridedLayout:
    """An int64 buffer of a header of single values, then `stride` entries per field, then
    fields of stride + 1 entries, then one open-ended field: offsets() gives where each
    starts for a stride, the same in Python and (emitted) in the kernels."""

    name: str
    doc: str
    header: tuple
    per_split: tuple
    per_split_plus_one: tuple = ()
    tail: str | None = None

    def offsets(self, stride: int) -> dict:
        out, at = {}, 0
        for f in self.header:
            out[f], at = at, at + 1
        for f in self.per_split:
            out[f], at = at, at + stride
        for f in self.per_split_plus_one:
            out[f], at = at, at + stride + 1
        if self.tail is not None:
            out[self.tail] = at
        return out

    def size(self, stride: int, tail: int = 0) -> int:
        o = self.offsets(stride)
        return (o[self.tail] if self.tail is not None else max(o.values()) + stride + (
            1 if self.per_split_plus_one else 0)) + tail

    def build(self, stride: int, tail=None, **fields) -> np.ndarray:
        """The buffer, each field's values (at most its room, zeros after) at its offset. One
        concatenation in the fields' order: a host-grown tree builds one for every split."""
        parts = []
        for names, room in ((self.header, 1), (self.per_split, stride), (self.per_split_plus_one, stride + 1)):
            for f in names:
                v = fields.pop(f, _NO_VALUES)
                n = np.size(v)
                if n > room:
                    raise ValueError(f"{self.name}.{f}: {n} values for its {room} entries")
                parts.append(v)
                if n < room:
                    parts.append(np.zeros(room - n, dtype=np.int64))
        if fields:
            raise TypeError(f"{self.name} has no fields {sorted(fields)}")
        if self.tail is not None and tail is not None:
            parts.append(tail)
        # Integers (and flags) only: a float field is a mistake, not something to truncate.
        return np.concatenate(parts, dtype=np.int64, casting="same_kind")

    def c_declaration(self) -> str:
        names = list(self.header) + list(self.per_split) + list(self.per_split_plus_one) + (
            [self.tail] if self.tail else [])
        inits = []
        at_const, at_stride = 0, 0
        for f in names:
            inits.append(f"{f}({at_const}{f' + {at_stride} * stride' if at_stride else ''})")
            if f in self.header:
                at_const += 1
            elif f in self.per_split:
                at_stride += 1
            elif f in self.per_split_plus_one:
                at_stride += 1
                at_const += 1
        members = ", ".join(names)
        return (f"// {self.doc}\nstruct {self.name} {{\n  long long {members};\n"
                f"  __host__ __device__ explicit {self.name}(long long stride)\n      : "
                + ",\n        ".join(inits) + " {}\n};\n")


# partition.cu's info: a level's splits and their tiles (partition/cuda.py writes it on the
# host, growth.cu on the device). category_row: -1 for a numeric split; for a categorical one
# the row of the launch's category-set words (partition.cu) that holds its set. Split i owns tiles first_tile[i] .. first_tile[i+1]-1;
# tile_split[b] is the split of tile b.
PARTITION_INFO = StridedLayout(
    "PartitionInfo", "where each field of partition.cu's info starts (offsets into the int64 buffer)",
    header=("k", "n_tiles"),
    per_split=("start", "count", "feature", "bin", "default_left", "left_id", "right_id", "row_offset",
               "category_row"),
    per_split_plus_one=("first_tile",), tail="tile_split")

# partition.cu label_rows' info: the nodes whose rows it labels, each's segment and tiles.
LABEL_INFO = StridedLayout("LabelInfo", "where each field of partition.cu label_rows' info starts",
                           header=(), per_split=("start", "count", "node"), per_split_plus_one=("first_tile",),
                           tail="tile_node")

# histogram_children.cu's info: k splits, each's parent row and whether its right child was built.
CHILDREN_INFO = StridedLayout("ChildrenInfo", "where each field of histogram_children.cu's info starts",
                              header=("k",), per_split=("parent_row", "build_right"))

# histogram.cu's tiles: a header row (n_tiles, 0, 0, 0), then a row per tile of these columns.
HISTOGRAM_TILE_COLUMNS = ("slot", "node", "index", "row_offset")


def _enum(name: str, doc: str, prefix: str, values, count: str) -> str:
    items = "".join(f"  {prefix}{_camel(v)},\n" for v in values)
    return f"// {doc}\nenum {name} {{\n{items}  {count}\n}};\n"


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


# --------------------------------------------------------------------------- packing a launch's arguments
def kernel_args(struct: Struct, **values) -> np.ndarray:
    """One struct for a kernel launch, by value: a (1,) array of the struct's bytes
    (struct.raw_dtype; CuPy passes them as the C struct). A pointer field takes a CuPy array (its address) or None (null); every
    field but padding ("_" names, zero) must be given."""
    try:
        row = tuple((0 if values[f] is None else values[f].data.ptr) if kind == 1 else values[f] if kind == 0 else 0
                    for f, kind in struct.packing)
    except KeyError:
        raise TypeError(f"{struct.name} needs {[f for f, k in struct.packing if k < 2 and f not in values]}") from None
    # Passed as bytes (an unstructured view of the same item): CuPy takes a numpy argument's
    # address from its __array_interface__, whose field list a structured dtype rebuilds in
    # Python on every launch (~10 us a struct).
    return np.array([row], dtype=struct.dtype).view(struct.raw_dtype)


# --------------------------------------------------------------------------- the header
HEADER_PATH = "kernels/layouts.cuh"


def header() -> str:
    """The text of kernels/layouts.cuh."""
    parts = ["// Generated from daskgb/layouts.py by its write_header(): do not edit.\n"
             "// The layouts, kernel arguments and constants the kernels share with Python.\n"
             "#pragma once\n"
             "#ifdef __CUDACC_RTC__\n"
             "// NVRTC (cupy.RawModule) ships no C++ standard headers: the fixed-width types, spelled out.\n"
             "typedef signed char int8_t;\ntypedef unsigned char uint8_t;\ntypedef int int32_t;\n"
             "typedef unsigned int uint32_t;\ntypedef long long int64_t;\ntypedef unsigned long long uint64_t;\n"
             "#else\n#include <cstdint>\n#endif\n"
             "#ifndef __CUDACC__\n"
             "// A host compiler checking the layouts (tests/stages/test_layouts.py).\n"
             "#define __host__\n#define __device__\nstruct float2 { float x, y; };\n"
             "#endif\n"]
    parts.append("\n".join(f"constexpr {c} {n} = {_c_literal(v, c)};  // {doc}" for n, c, v, doc in CONSTANTS) + "\n")
    parts.extend(s.c_declaration() for s in STRUCTS)
    # NVRTC has no offsetof: the host compilers check the offsets (tests/stages/test_layouts.py), and a
    # kernel reads them on the GPU (the same test's GPU half).
    parts.append("#ifndef __CUDACC_RTC__\n" + "".join(s.c_offset_checks() for s in STRUCTS) + "#endif\n")
    parts.append(_enum("TreeField", "a device-grown tree's rows of words (TREE_FIELDS)", "k", TREE_FIELDS,
                       "kFields"))
    parts.append(_enum("GrowthState", "a device-grown tree's state (GROWTH_STATE)", "k", GROWTH_STATE, "kStateSize"))
    parts.append(_enum("LossguideState", "a device-grown lossguide tree's state (LOSSGUIDE_STATE)", "kLg",
                       LOSSGUIDE_STATE, "kLgStateSize"))
    parts.append(_enum("TileColumn", "histogram.cu's tile rows (HISTOGRAM_TILE_COLUMNS)", "kTile",
                       HISTOGRAM_TILE_COLUMNS, "kTileColumns"))
    parts.append(PARTITION_INFO.c_declaration())
    parts.append(LABEL_INFO.c_declaration())
    parts.append(CHILDREN_INFO.c_declaration())
    return "\n".join(parts)


def _c_literal(value, c_type: str) -> str:
    if c_type == "double":
        return repr(float(value))
    if c_type == "unsigned":
        return f"{int(value)}u"
    return str(int(value))


def write_header() -> str:
    """Write kernels/layouts.cuh (the repository's) from this module; returns its path."""
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / HEADER_PATH
    path.write_text(header())
    return str(path)
