// GPU FIFOs: without the toolkit every creation says so; with a GPU, a FIFO
// is allocated and formatted as fifo/layout.h's (its header read back
// matches a host FIFO's), exported, its abort word raised from the host, and
// a FIFO opened in this process is refused (CUDA IPC opens only other
// processes' handles: the connector addresses those by pointer).
#include "transport/cuda/gpu_fifo.h"

#include <cstring>
#include <string>

#include "base/cuda.h"
#include "base/gpu_test.h"
#include "gtest/gtest.h"

namespace ringo::transport {
namespace {

TEST(DeviceFifo, WithoutCudaToolkitSaysSo) {
  if (base::CudaRuntimeBuilt()) GTEST_SKIP() << "built with the CUDA toolkit";
  auto made = OwnedDeviceFifo::Create(0, FifoGeometry{4096, 0, 1024}, 0);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.status().message().find("without the CUDA toolkit"), std::string::npos);
  EXPECT_EQ(DeviceOfBusId("0000:00:00.0"), -1);
}

TEST(DeviceFifo, AllocatesAFormattedFifo) {
  RINGO_SKIP_WITHOUT_GPU(base::ProbeCuda().device_count > 0,
                         "no CUDA device visible (" << base::ProbeCuda().reason << "): GPU FIFOs not tested");
  const FifoGeometry g{4096, 0, 1024};
  auto made = OwnedDeviceFifo::Create(0, g, 3);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  std::shared_ptr<OwnedDeviceFifo> fifo = *made;
  EXPECT_EQ(base::PointerDevice(fifo->base()), 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(fifo->base()) % 256, 0u);
  // The header as the host formats it, counters at zero.
  FifoHeader header;
  ASSERT_TRUE(base::CopyToHost(&header, fifo->base(), sizeof(header)).ok());
  FifoHeader expected;
  FormatFifoHeader(&expected, g, 3, ProcessId{});
  EXPECT_EQ(header.magic, expected.magic);
  EXPECT_EQ(header.slot_bytes, 4096u);
  EXPECT_EQ(header.ll_slot_bytes, 1024u);
  EXPECT_EQ(header.receiver_rank, 3);
  EXPECT_EQ(header.tail.value.load(), 0u);
  EXPECT_EQ(header.sender_aborted.load(), 0u);
  unsigned char handle[kCudaIpcHandleBytes];
  char bus[kCudaBusIdBytes];
  ASSERT_TRUE(fifo->Export(handle, bus).ok());
  EXPECT_EQ(DeviceOfBusId(bus), 0);
  // An abort word raised from the host lands in device memory.
  auto words = DeviceWords::Create(0);
  ASSERT_TRUE(words.ok()) << words.status().ToString();
  auto* h = static_cast<FifoHeader*>(fifo->base());
  (*words)->WriteOne(reinterpret_cast<uint32_t*>(&h->receiver_aborted));
  (*words)->Flush();
  ASSERT_TRUE(base::CopyToHost(&header, fifo->base(), sizeof(header)).ok());
  EXPECT_EQ(header.receiver_aborted.load(), 1u);
  EXPECT_EQ(header.sender_aborted.load(), 0u);
  // This process's own handle: CUDA refuses it (the connector uses the pointer instead).
  EXPECT_FALSE(OpenIpcDeviceFifo(handle, 0).ok());
}

}  // namespace
}  // namespace ringo::transport
