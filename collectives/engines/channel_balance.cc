#include "collectives/engines/channel_balance.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ringo::collectives {

ChannelBalance::ChannelBalance(int nchannels)
    : nchannels_(std::max(1, nchannels)),
      cum_(nchannels_ + 1),
      bytes_(nchannels_, 0),
      seconds_(nchannels_, 0.0) {
  for (int c = 0; c <= nchannels_; ++c) {
    cum_[c] = static_cast<uint32_t>(static_cast<uint64_t>(kTotal) * c / nchannels_);
  }
}

void ChannelBalance::Record(int channel, int64_t bytes, double seconds) {
  if (channel < 0 || channel >= nchannels_) return;
  bytes_[channel] += bytes;
  seconds_[channel] += std::max(seconds, 0.0);
}

bool ChannelBalance::CallDone(int64_t bytes) {
  if (adoptions_ < kQuickPeriods) return true;
  predicted_ += static_cast<double>(bytes) / agreed_rate_;
  return predicted_ >= kPeriodSeconds;
}

std::vector<double> ChannelBalance::Seconds() const { return seconds_; }

void ChannelBalance::Adopt(const std::vector<double>& pooled_seconds, int nranks) {
  std::vector<double> rates(nchannels_, 0.0);
  double sum = 0;
  bool measured = static_cast<int>(pooled_seconds.size()) == nchannels_;
  for (int c = 0; measured && c < nchannels_; ++c) {
    const double mean = pooled_seconds[c] / std::max(1, nranks);
    if (!(mean > 0) || bytes_[c] <= 0 || !std::isfinite(mean)) {
      measured = false;
      break;
    }
    rates[c] = static_cast<double>(bytes_[c]) / mean;
    sum += rates[c];
  }
  std::fill(bytes_.begin(), bytes_.end(), 0);
  std::fill(seconds_.begin(), seconds_.end(), 0.0);
  predicted_ = 0;
  if (!measured || !(sum > 0) || !std::isfinite(sum)) return;  // keep the split; measure again
  // Shares in proportion to the rates, each at least the floor (kMinShare,
  // or half an equal part where channels are so many that kMinShare each
  // would not fit): the channels under it are set to it and the others
  // rescaled to the rest, until none is under it.
  const double floor = std::min(kMinShare, 0.5 / nchannels_);
  std::vector<double> share(nchannels_);
  std::vector<bool> floored(nchannels_, false);
  for (int round = 0; round <= nchannels_; ++round) {
    double free_rate = 0;
    int nfloored = 0;
    for (int c = 0; c < nchannels_; ++c) {
      if (floored[c]) {
        ++nfloored;
      } else {
        free_rate += rates[c];
      }
    }
    bool changed = false;
    for (int c = 0; c < nchannels_; ++c) {
      share[c] = floored[c] ? floor : (1.0 - nfloored * floor) * rates[c] / free_rate;
      if (!floored[c] && share[c] < floor) {
        floored[c] = true;
        changed = true;
      }
    }
    if (!changed) break;
  }
  double acc = 0;
  cum_[0] = 0;
  for (int c = 0; c < nchannels_; ++c) {
    acc += share[c];
    const uint32_t at = c + 1 == nchannels_ ? kTotal : static_cast<uint32_t>(std::lround(acc * kTotal));
    cum_[c + 1] = std::clamp(at, cum_[c], kTotal);
  }
  rates_ = rates;
  agreed_rate_ = sum;
  ++adoptions_;
}

std::string ChannelBalance::Describe() const {
  std::string parts, rates;
  char buf[64];
  for (int c = 0; c < nchannels_; ++c) {
    parts += (c ? "/" : "") + std::to_string(cum_[c + 1] - cum_[c]);
    if (!rates_.empty()) {
      std::snprintf(buf, sizeof(buf), "%s%.1f", c ? "/" : "", rates_[c] / 1e6);
      rates += buf;
    }
  }
  return parts + " of " + std::to_string(kTotal) + (rates.empty() ? "" : " from " + rates + " MB/s");
}

}  // namespace ringo::collectives
