// How a host ring's channels share a collective's elements when they cross
// links of unequal speed (several NICs, or paths of unequal rate): in
// proportion to each channel's measured rate rather than in equal parts,
// so that every channel finishes at about the same time and the job runs
// at the links' sum, not at the slowest link times the channel count.
//
// Measured, not configured: each rank times every channel of each call that
// uses all of them (from the call's start to the channel's end) and sums
// bytes and seconds per channel. At agreed points the ranks pool those sums
// (an all-reduce of the seconds on the ring itself, in the call that ends
// the period) and every rank computes the same new split from the same
// numbers: no exchange per call. The points are agreed without messages:
// the first kQuickPeriods periods are one call each (the first call that
// uses every channel is the setup's measurement; a connection's first
// transfers run below its rate, so the next two correct it at once); after
// that a period ends once its calls, at the rates last agreed, would have
// taken kPeriodSeconds; every rank counts the same calls
// and the same bytes, so every rank reaches the same point. A link that
// slows mid-job shows in the next period's times and gets less within a
// period or two (its calls take longer than predicted, so a period lasts at
// most the slowdown times kPeriodSeconds).
//
// Each channel keeps at least kMinShare of the elements (half an equal part
// where there are more than 16 channels), so a link that recovers is seen
// recovering. A rank that enters a call late adds the same wait to every
// channel's time, which draws the split towards the one in use, not away
// from the rates: the proportional split is still where it settles, more
// slowly where calls wait for each other more than they transfer. Not thread-safe beyond Record (one channel
// per thread, read after the call's threads joined).
#ifndef RINGO_COLLECTIVES_ENGINES_CHANNEL_BALANCE_H_
#define RINGO_COLLECTIVES_ENGINES_CHANNEL_BALANCE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace ringo::collectives {

class ChannelBalance {
 public:
  static constexpr double kPeriodSeconds = 0.5;
  static constexpr int kQuickPeriods = 3;
  static constexpr uint32_t kTotal = 4096;    // the split's unit: parts of 4096
  static constexpr double kMinShare = 1.0 / 32;
  // A call counts towards the measurement when each channel moves at least
  // this much (smaller ones time latency, not rate).
  static constexpr int64_t kMinChannelBytes = 256 * 1024;

  explicit ChannelBalance(int nchannels);

  int nchannels() const { return nchannels_; }
  // The cumulative weights (nchannels + 1) a call over every channel uses.
  const uint32_t* split() const { return cum_.data(); }
  // Whether calls measure (every call over every channel does once a rank
  // has seen one large enough; the caller decides which calls qualify).
  // After channel `c`'s part of a qualifying call: its bytes and seconds.
  void Record(int channel, int64_t bytes, double seconds);
  // After a qualifying call of `bytes` (the same figure on every rank):
  // whether it ends a period, so that the ranks now pool their sums.
  bool CallDone(int64_t bytes);
  // This rank's seconds per channel since the last point (the all-reduce's
  // input) and its bytes per channel, the same on every rank.
  std::vector<double> Seconds() const;
  // The pooled seconds (summed over the ranks, `nranks` of them): the new
  // split, adopted by every rank alike. Starts the next period.
  void Adopt(const std::vector<double>& pooled_seconds, int nranks);
  // "3277/819 of 4096 from 62.1/15.3 MB/s" (the last adoption).
  std::string Describe() const;
  int adoptions() const { return adoptions_; }

 private:
  const int nchannels_;
  std::vector<uint32_t> cum_;
  std::vector<int64_t> bytes_;   // per channel, this period
  std::vector<double> seconds_;  // per channel, this period
  std::vector<double> rates_;    // bytes/s per channel, last agreed (empty before the first)
  double agreed_rate_ = 0;       // their sum
  double predicted_ = 0;         // this period's calls at the agreed rates, in seconds
  int adoptions_ = 0;
};

}  // namespace ringo::collectives

#endif  // RINGO_COLLECTIVES_ENGINES_CHANNEL_BALANCE_H_
