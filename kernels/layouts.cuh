// Generated from daskgb/layouts.py by its write_header(): do not edit.
// The layouts, kernel arguments and constants the kernels share with Python.
#pragma once
#ifdef __CUDACC_RTC__
// NVRTC (cupy.RawModule) ships no C++ standard headers: the fixed-width types, spelled out.
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
#else
#include <cstdint>
#endif
#ifndef __CUDACC__
// A host compiler checking the layouts (tests/stages/test_layouts.py).
#define __host__
#define __device__
struct float2 { float x, y; };
#endif

constexpr int kPartitionTileRows = 4096;  // rows of a partition tile
constexpr double kRtEps = 1e-06;  // a split's loss change must exceed it (split/rules.py RT_EPS)
constexpr int kMaxSplits = 2048;  // splits of one level a device-grown tree may make
constexpr unsigned kWindowSlots = 8u;  // slots a histogram thread reads from one window of words
constexpr int kSplitThreads = 256;  // threads of a split-evaluation block
constexpr int kMaxCandidates = 64;  // candidate thresholds of a sampling step
constexpr int kCategoryRow = 13;  // a device-grown tree's first row of category-set words

// the best split of one node (SPLIT_DTYPE)
struct SplitRecord {
  double left_grad;
  double left_hess;
  double right_grad;
  double right_hess;
  float gain;
  float threshold;
  int32_t feature;
  int32_t bin;
  int32_t default_left;
  int32_t categorical;
};
static_assert(sizeof(SplitRecord) == 56, "SplitRecord: size");

// one node of a tree for prediction (PREDICT_NODE_DTYPE)
struct PredictNode {
  int32_t left;
  int32_t right;
  int32_t feature;
  int32_t default_left;
  float threshold;
  float value;
};
static_assert(sizeof(PredictNode) == 24, "PredictNode: size");

// a split candidate of split.cu (blocks park theirs in global memory)
struct Candidate {
  float loss;
  int feature;
  int order;
  long long left_g;
  long long left_h;
  long long right_g;
  long long right_h;
};
static_assert(sizeof(Candidate) == 48, "Candidate: size");

// an ELLPACK matrix as kernels read it (ellpack/cuda.py ellpack_view)
struct EllpackView {
  const uint32_t* words;
  const int32_t* ptrs;
  unsigned long long n_words;
  int bits;
  int row_stride;
  uint32_t null_symbol;
  int n_features;
};
static_assert(sizeof(EllpackView) == 40, "EllpackView: size");

// the split rules' parameters and the learning rate (split/cuda.py)
struct SplitParams {
  double reg_lambda;
  double reg_alpha;
  double min_child_weight;
  double max_delta_step;
  float min_split_loss;
  float eta;
};
static_assert(sizeof(SplitParams) == 40, "SplitParams: size");

// a histogram launch's rows, gradients, tiles and output
struct HistogramArgs {
  const uint32_t* ridx;
  const float2* gpair;
  const double* inv_scale;
  const long long* tiles;
  const long long* segs;
  const int32_t* groups;
  long long* hist;
  long long tile_rows;
  int total_bins;
  int threads_per_row;
  int window;
};
static_assert(sizeof(HistogramArgs) == 80, "HistogramArgs: size");

// a split launch's histograms, sums, cuts and feature masks
struct SplitInputs {
  const long long* hist;
  const long long* parent;
  const int32_t* ptrs;
  const float* cut_values;
  const float* min_values;
  const uint8_t* feature_mask;
  const uint8_t* categorical;
  const double* scale;
  const long long* k_live;
  int total_bins;
  int n_features;
  int n_cut_values;
  int mask_stride;
  int k_static;
};
static_assert(sizeof(SplitInputs) == 96, "SplitInputs: size");

// a split launch's records, children's sums and scratch
struct SplitOutputs {
  Candidate* partial;
  unsigned* counters;
  SplitRecord* records;
  long long* left;
  long long* right;
};
static_assert(sizeof(SplitOutputs) == 40, "SplitOutputs: size");

// a split launch's categorical features, their candidates and sets
struct CategoricalArgs {
  const int32_t* features;
  Candidate* candidates;
  uint32_t* sets;
  uint32_t* node_sets;
  int n_categorical;
  int set_words;
  int max_cat_to_onehot;
  int max_cat_threshold;
  int sort_size;
};
static_assert(sizeof(CategoricalArgs) == 56, "CategoricalArgs: size");

// a device-grown tree's words, state, segments and launch inputs
struct TreeBuffers {
  int* tree;
  long long* state;
  long long* segs;
  long long* part_info;
  long long* child_info;
  long long* hist_tiles;
  uint32_t* category_sets;
  long long tile_rows;
  int cap;
  int part_stride;
  int category_words;
};
static_assert(sizeof(TreeBuffers) == 80, "TreeBuffers: size");

#ifndef __CUDACC_RTC__
static_assert(__builtin_offsetof(SplitRecord, left_grad) == 0, "SplitRecord.left_grad: offset");
static_assert(__builtin_offsetof(SplitRecord, left_hess) == 8, "SplitRecord.left_hess: offset");
static_assert(__builtin_offsetof(SplitRecord, right_grad) == 16, "SplitRecord.right_grad: offset");
static_assert(__builtin_offsetof(SplitRecord, right_hess) == 24, "SplitRecord.right_hess: offset");
static_assert(__builtin_offsetof(SplitRecord, gain) == 32, "SplitRecord.gain: offset");
static_assert(__builtin_offsetof(SplitRecord, threshold) == 36, "SplitRecord.threshold: offset");
static_assert(__builtin_offsetof(SplitRecord, feature) == 40, "SplitRecord.feature: offset");
static_assert(__builtin_offsetof(SplitRecord, bin) == 44, "SplitRecord.bin: offset");
static_assert(__builtin_offsetof(SplitRecord, default_left) == 48, "SplitRecord.default_left: offset");
static_assert(__builtin_offsetof(SplitRecord, categorical) == 52, "SplitRecord.categorical: offset");
static_assert(__builtin_offsetof(PredictNode, left) == 0, "PredictNode.left: offset");
static_assert(__builtin_offsetof(PredictNode, right) == 4, "PredictNode.right: offset");
static_assert(__builtin_offsetof(PredictNode, feature) == 8, "PredictNode.feature: offset");
static_assert(__builtin_offsetof(PredictNode, default_left) == 12, "PredictNode.default_left: offset");
static_assert(__builtin_offsetof(PredictNode, threshold) == 16, "PredictNode.threshold: offset");
static_assert(__builtin_offsetof(PredictNode, value) == 20, "PredictNode.value: offset");
static_assert(__builtin_offsetof(Candidate, loss) == 0, "Candidate.loss: offset");
static_assert(__builtin_offsetof(Candidate, feature) == 4, "Candidate.feature: offset");
static_assert(__builtin_offsetof(Candidate, order) == 8, "Candidate.order: offset");
static_assert(__builtin_offsetof(Candidate, left_g) == 16, "Candidate.left_g: offset");
static_assert(__builtin_offsetof(Candidate, left_h) == 24, "Candidate.left_h: offset");
static_assert(__builtin_offsetof(Candidate, right_g) == 32, "Candidate.right_g: offset");
static_assert(__builtin_offsetof(Candidate, right_h) == 40, "Candidate.right_h: offset");
static_assert(__builtin_offsetof(EllpackView, words) == 0, "EllpackView.words: offset");
static_assert(__builtin_offsetof(EllpackView, ptrs) == 8, "EllpackView.ptrs: offset");
static_assert(__builtin_offsetof(EllpackView, n_words) == 16, "EllpackView.n_words: offset");
static_assert(__builtin_offsetof(EllpackView, bits) == 24, "EllpackView.bits: offset");
static_assert(__builtin_offsetof(EllpackView, row_stride) == 28, "EllpackView.row_stride: offset");
static_assert(__builtin_offsetof(EllpackView, null_symbol) == 32, "EllpackView.null_symbol: offset");
static_assert(__builtin_offsetof(EllpackView, n_features) == 36, "EllpackView.n_features: offset");
static_assert(__builtin_offsetof(SplitParams, reg_lambda) == 0, "SplitParams.reg_lambda: offset");
static_assert(__builtin_offsetof(SplitParams, reg_alpha) == 8, "SplitParams.reg_alpha: offset");
static_assert(__builtin_offsetof(SplitParams, min_child_weight) == 16, "SplitParams.min_child_weight: offset");
static_assert(__builtin_offsetof(SplitParams, max_delta_step) == 24, "SplitParams.max_delta_step: offset");
static_assert(__builtin_offsetof(SplitParams, min_split_loss) == 32, "SplitParams.min_split_loss: offset");
static_assert(__builtin_offsetof(SplitParams, eta) == 36, "SplitParams.eta: offset");
static_assert(__builtin_offsetof(HistogramArgs, ridx) == 0, "HistogramArgs.ridx: offset");
static_assert(__builtin_offsetof(HistogramArgs, gpair) == 8, "HistogramArgs.gpair: offset");
static_assert(__builtin_offsetof(HistogramArgs, inv_scale) == 16, "HistogramArgs.inv_scale: offset");
static_assert(__builtin_offsetof(HistogramArgs, tiles) == 24, "HistogramArgs.tiles: offset");
static_assert(__builtin_offsetof(HistogramArgs, segs) == 32, "HistogramArgs.segs: offset");
static_assert(__builtin_offsetof(HistogramArgs, groups) == 40, "HistogramArgs.groups: offset");
static_assert(__builtin_offsetof(HistogramArgs, hist) == 48, "HistogramArgs.hist: offset");
static_assert(__builtin_offsetof(HistogramArgs, tile_rows) == 56, "HistogramArgs.tile_rows: offset");
static_assert(__builtin_offsetof(HistogramArgs, total_bins) == 64, "HistogramArgs.total_bins: offset");
static_assert(__builtin_offsetof(HistogramArgs, threads_per_row) == 68, "HistogramArgs.threads_per_row: offset");
static_assert(__builtin_offsetof(HistogramArgs, window) == 72, "HistogramArgs.window: offset");
static_assert(__builtin_offsetof(SplitInputs, hist) == 0, "SplitInputs.hist: offset");
static_assert(__builtin_offsetof(SplitInputs, parent) == 8, "SplitInputs.parent: offset");
static_assert(__builtin_offsetof(SplitInputs, ptrs) == 16, "SplitInputs.ptrs: offset");
static_assert(__builtin_offsetof(SplitInputs, cut_values) == 24, "SplitInputs.cut_values: offset");
static_assert(__builtin_offsetof(SplitInputs, min_values) == 32, "SplitInputs.min_values: offset");
static_assert(__builtin_offsetof(SplitInputs, feature_mask) == 40, "SplitInputs.feature_mask: offset");
static_assert(__builtin_offsetof(SplitInputs, categorical) == 48, "SplitInputs.categorical: offset");
static_assert(__builtin_offsetof(SplitInputs, scale) == 56, "SplitInputs.scale: offset");
static_assert(__builtin_offsetof(SplitInputs, k_live) == 64, "SplitInputs.k_live: offset");
static_assert(__builtin_offsetof(SplitInputs, total_bins) == 72, "SplitInputs.total_bins: offset");
static_assert(__builtin_offsetof(SplitInputs, n_features) == 76, "SplitInputs.n_features: offset");
static_assert(__builtin_offsetof(SplitInputs, n_cut_values) == 80, "SplitInputs.n_cut_values: offset");
static_assert(__builtin_offsetof(SplitInputs, mask_stride) == 84, "SplitInputs.mask_stride: offset");
static_assert(__builtin_offsetof(SplitInputs, k_static) == 88, "SplitInputs.k_static: offset");
static_assert(__builtin_offsetof(SplitOutputs, partial) == 0, "SplitOutputs.partial: offset");
static_assert(__builtin_offsetof(SplitOutputs, counters) == 8, "SplitOutputs.counters: offset");
static_assert(__builtin_offsetof(SplitOutputs, records) == 16, "SplitOutputs.records: offset");
static_assert(__builtin_offsetof(SplitOutputs, left) == 24, "SplitOutputs.left: offset");
static_assert(__builtin_offsetof(SplitOutputs, right) == 32, "SplitOutputs.right: offset");
static_assert(__builtin_offsetof(CategoricalArgs, features) == 0, "CategoricalArgs.features: offset");
static_assert(__builtin_offsetof(CategoricalArgs, candidates) == 8, "CategoricalArgs.candidates: offset");
static_assert(__builtin_offsetof(CategoricalArgs, sets) == 16, "CategoricalArgs.sets: offset");
static_assert(__builtin_offsetof(CategoricalArgs, node_sets) == 24, "CategoricalArgs.node_sets: offset");
static_assert(__builtin_offsetof(CategoricalArgs, n_categorical) == 32, "CategoricalArgs.n_categorical: offset");
static_assert(__builtin_offsetof(CategoricalArgs, set_words) == 36, "CategoricalArgs.set_words: offset");
static_assert(__builtin_offsetof(CategoricalArgs, max_cat_to_onehot) == 40, "CategoricalArgs.max_cat_to_onehot: offset");
static_assert(__builtin_offsetof(CategoricalArgs, max_cat_threshold) == 44, "CategoricalArgs.max_cat_threshold: offset");
static_assert(__builtin_offsetof(CategoricalArgs, sort_size) == 48, "CategoricalArgs.sort_size: offset");
static_assert(__builtin_offsetof(TreeBuffers, tree) == 0, "TreeBuffers.tree: offset");
static_assert(__builtin_offsetof(TreeBuffers, state) == 8, "TreeBuffers.state: offset");
static_assert(__builtin_offsetof(TreeBuffers, segs) == 16, "TreeBuffers.segs: offset");
static_assert(__builtin_offsetof(TreeBuffers, part_info) == 24, "TreeBuffers.part_info: offset");
static_assert(__builtin_offsetof(TreeBuffers, child_info) == 32, "TreeBuffers.child_info: offset");
static_assert(__builtin_offsetof(TreeBuffers, hist_tiles) == 40, "TreeBuffers.hist_tiles: offset");
static_assert(__builtin_offsetof(TreeBuffers, category_sets) == 48, "TreeBuffers.category_sets: offset");
static_assert(__builtin_offsetof(TreeBuffers, tile_rows) == 56, "TreeBuffers.tile_rows: offset");
static_assert(__builtin_offsetof(TreeBuffers, cap) == 64, "TreeBuffers.cap: offset");
static_assert(__builtin_offsetof(TreeBuffers, part_stride) == 68, "TreeBuffers.part_stride: offset");
static_assert(__builtin_offsetof(TreeBuffers, category_words) == 72, "TreeBuffers.category_words: offset");
#endif

// a device-grown tree's rows of words (TREE_FIELDS)
enum TreeField {
  kLeft,
  kRight,
  kParent,
  kFeature,
  kBin,
  kThreshold,
  kDefaultLeft,
  kValue,
  kBaseWeight,
  kGain,
  kCover,
  kDepth,
  kFields
};

// a device-grown tree's state (GROWTH_STATE)
enum GrowthState {
  kNodes,
  kCandidates,
  kFirstCandidate,
  kSplits,
  kStateSize
};

// a device-grown lossguide tree's state (LOSSGUIDE_STATE)
enum LossguideState {
  kLgLeaves,
  kLgDone,
  kLgEvaluatedFirst,
  kLgEvaluatedCount,
  kLgSlots,
  kLgStateSize
};

// histogram.cu's tile rows (HISTOGRAM_TILE_COLUMNS)
enum TileColumn {
  kTileSlot,
  kTileNode,
  kTileIndex,
  kTileRowOffset,
  kTileColumns
};

// where each field of partition.cu's info starts (offsets into the int64 buffer)
struct PartitionInfo {
  long long k, n_tiles, start, count, feature, bin, default_left, left_id, right_id, row_offset, category_row, first_tile, tile_split;
  __host__ __device__ explicit PartitionInfo(long long stride)
      : k(0),
        n_tiles(1),
        start(2),
        count(2 + 1 * stride),
        feature(2 + 2 * stride),
        bin(2 + 3 * stride),
        default_left(2 + 4 * stride),
        left_id(2 + 5 * stride),
        right_id(2 + 6 * stride),
        row_offset(2 + 7 * stride),
        category_row(2 + 8 * stride),
        first_tile(2 + 9 * stride),
        tile_split(3 + 10 * stride) {}
};

// where each field of partition.cu label_rows' info starts
struct LabelInfo {
  long long start, count, node, first_tile, tile_node;
  __host__ __device__ explicit LabelInfo(long long stride)
      : start(0),
        count(0 + 1 * stride),
        node(0 + 2 * stride),
        first_tile(0 + 3 * stride),
        tile_node(1 + 4 * stride) {}
};

// where each field of histogram_children.cu's info starts
struct ChildrenInfo {
  long long k, parent_row, build_right;
  __host__ __device__ explicit ChildrenInfo(long long stride)
      : k(0),
        parent_row(1),
        build_right(1 + 1 * stride) {}
};
