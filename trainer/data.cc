#include "trainer/data.h"

#include <sys/stat.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>

namespace ringo::train {
namespace {

uint32_t BigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// The whole file, decompressed when it is gzip (zlib reads plain files as they are).
base::StatusOr<std::vector<uint8_t>> ReadFile(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) {
    return base::SystemError("cannot open " + path + ": " + std::strerror(errno));
  }
  std::vector<uint8_t> out;
  uint8_t buf[1 << 16];
  for (;;) {
    const int n = gzread(f, buf, sizeof(buf));
    if (n < 0) {
      int err = 0;
      const std::string msg = gzerror(f, &err);
      gzclose(f);
      return base::SystemError("cannot read " + path + ": " + msg);
    }
    if (n == 0) break;
    out.insert(out.end(), buf, buf + n);
  }
  gzclose(f);
  return out;
}

base::StatusOr<std::string> FindFile(const std::string& dir, const std::string& name) {
  for (const std::string& candidate : {dir + "/" + name + ".gz", dir + "/" + name}) {
    if (Exists(candidate)) return candidate;
  }
  return base::InvalidArgument("no " + name + "[.gz] in " + dir +
                               " (Debian's dataset-fashion-mnist package installs it in " +
                               kDefaultDataDir + "; --data DIR names another copy)");
}

}  // namespace

base::StatusOr<Dataset> ParseIdx(const std::vector<uint8_t>& images,
                                 const std::vector<uint8_t>& labels, const std::string& what) {
  if (images.size() < 16 || BigEndian32(images.data()) != 0x00000803) {
    return base::InvalidArgument(what + ": images are not an IDX file of unsigned bytes, 3-D");
  }
  if (labels.size() < 8 || BigEndian32(labels.data()) != 0x00000801) {
    return base::InvalidArgument(what + ": labels are not an IDX file of unsigned bytes, 1-D");
  }
  Dataset d;
  const uint64_t count = BigEndian32(images.data() + 4);
  const uint64_t rows = BigEndian32(images.data() + 8);
  const uint64_t cols = BigEndian32(images.data() + 12);
  if (count == 0 || count > (1u << 30) || rows * cols == 0 || rows * cols > (1u << 20) ||
      images.size() != 16 + count * rows * cols) {
    return base::InvalidArgument(what + ": the image file's size does not match its header");
  }
  if (BigEndian32(labels.data() + 4) != count || labels.size() != 8 + count) {
    return base::InvalidArgument(what + ": " + std::to_string(count) +
                                 " images but the label file does not hold as many labels");
  }
  d.count = static_cast<int>(count);
  d.features = static_cast<int>(rows * cols);
  d.pixels.assign(images.begin() + 16, images.end());
  d.labels.assign(labels.begin() + 8, labels.end());
  for (uint8_t l : d.labels) {
    if (l >= 10) return base::InvalidArgument(what + ": a label is not below 10");
  }
  return d;
}

base::StatusOr<Dataset> LoadIdx(const std::string& dir, const std::string& prefix) {
  ASSIGN_OR_RETURN(const std::string image_path, FindFile(dir, prefix + "-images-idx3-ubyte"));
  ASSIGN_OR_RETURN(const std::string label_path, FindFile(dir, prefix + "-labels-idx1-ubyte"));
  ASSIGN_OR_RETURN(std::vector<uint8_t> images, ReadFile(image_path));
  ASSIGN_OR_RETURN(std::vector<uint8_t> labels, ReadFile(label_path));
  return ParseIdx(images, labels, image_path);
}

std::vector<int> EpochPermutation(int count, uint64_t seed, int epoch) {
  std::vector<int> perm(count);
  for (int i = 0; i < count; ++i) perm[i] = i;
  uint64_t state =
      (seed * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(epoch) * 0xd1b54a32d192ed03ULL) ^
      0x853c49e6748fea9bULL;
  if (state == 0) state = 1;  // xorshift never leaves 0
  for (int i = count - 1; i > 0; --i) {
    // xorshift64*, then a multiply-shift into [0, i]: the same on every platform.
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    const uint64_t r = (state * 0x2545f4914f6cdd1dULL) >> 32;
    const int j = static_cast<int>((r * static_cast<uint64_t>(i + 1)) >> 32);
    std::swap(perm[i], perm[j]);
  }
  return perm;
}

namespace {
void Normalise(const uint8_t* src, int features, float* dst) {
  constexpr float kScale = 1.0f / (255.0f * kPixelStd);
  constexpr float kShift = kPixelMean / kPixelStd;
  for (int f = 0; f < features; ++f) dst[f] = src[f] * kScale - kShift;
}
}  // namespace

void GatherBatch(const Dataset& data, const std::vector<int>& perm, int64_t first, int rows,
                 float* x, uint8_t* labels) {
  for (int r = 0; r < rows; ++r) {
    const int idx = perm[first + r];
    Normalise(&data.pixels[static_cast<size_t>(idx) * data.features], data.features,
              x + static_cast<size_t>(r) * data.features);
    labels[r] = data.labels[idx];
  }
}

void GatherRange(const Dataset& data, int first, int rows, float* x, uint8_t* labels) {
  for (int r = 0; r < rows; ++r) {
    Normalise(&data.pixels[static_cast<size_t>(first + r) * data.features], data.features,
              x + static_cast<size_t>(r) * data.features);
    labels[r] = data.labels[first + r];
  }
}

}  // namespace ringo::train
