// Fashion-MNIST (any IDX image/label pair) and the data-parallel sampler:
// every rank draws the same seeded permutation per epoch and takes its own
// shard of each global batch.
#ifndef RINGO_TRAINER_DATA_H_
#define RINGO_TRAINER_DATA_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace ringo::train {

// Where Debian's dataset-fashion-mnist package puts the files.
inline constexpr const char* kDefaultDataDir = "/usr/share/datasets/fashion-mnist";

struct Dataset {
  int count = 0;
  int features = 0;             // rows x cols of an image
  std::vector<uint8_t> pixels;  // count x features
  std::vector<uint8_t> labels;  // count
};

// Reads `<dir>/<prefix>-images-idx3-ubyte[.gz]` and the matching labels
// (prefix "train" or "t10k"), gzip-compressed or plain. Checks the magic
// numbers, sizes and label range (< 10).
base::StatusOr<Dataset> LoadIdx(const std::string& dir, const std::string& prefix);

// Parses IDX bytes already in memory (for tests).
base::StatusOr<Dataset> ParseIdx(const std::vector<uint8_t>& images,
                                 const std::vector<uint8_t>& labels, const std::string& what);

// Pixels scaled to [0, 1] and standardised with the training set's mean and
// deviation (Fashion-MNIST: 0.2860, 0.3530).
inline constexpr float kPixelMean = 0.2860f;
inline constexpr float kPixelStd = 0.3530f;

// The seeded permutation of epoch `epoch` of `count` samples: identical on
// every rank and platform (a fixed generator and Fisher-Yates).
std::vector<int> EpochPermutation(int count, uint64_t seed, int epoch);

// Global batch of `global_batch` samples = accum micro-batches x ranks x
// micro samples. Micro-batch m of rank r is the slice
// [(m * ranks + r) * micro, +micro) of the step's global batch, so the
// ranks of one micro-batch together hold one contiguous slice.
struct ShardPlan {
  int global_batch = 0;
  int accum = 1;
  int ranks = 1;
  // Rows rank `rank` takes of each micro-batch (global_batch / accum rows):
  // an equal share, and one more for the first ranks where it does not
  // divide (after an elastic shrink).
  int micro(int rank) const {
    const int per = global_batch / accum;
    return per / ranks + (rank < per % ranks ? 1 : 0);
  }
  int max_micro() const { return micro(0); }
  // Index into the epoch's permutation of the first sample of (step, m, rank).
  int64_t First(int64_t step_in_epoch, int m, int rank) const {
    const int per = global_batch / accum;
    const int64_t before = static_cast<int64_t>(rank) * (per / ranks) + std::min(rank, per % ranks);
    return step_in_epoch * global_batch + static_cast<int64_t>(m) * per + before;
  }
};

// Writes `rows` normalised samples perm[first..first+rows) to x (host
// [rows x features]) and their labels.
void GatherBatch(const Dataset& data, const std::vector<int>& perm, int64_t first, int rows,
                 float* x, uint8_t* labels);
// The same for samples first..first+rows of the data set in order.
void GatherRange(const Dataset& data, int first, int rows, float* x, uint8_t* labels);

}  // namespace ringo::train

#endif  // RINGO_TRAINER_DATA_H_
