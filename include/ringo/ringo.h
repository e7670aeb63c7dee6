/*
 * Ringo: collective communication for GPUs and host memory.
 *
 * The whole public API. C99; includes no CUDA header. Shaped like NCCL's so
 * that porting is a rename: enum values equal NCCL's.
 *
 * Thread safety: a communicator is used by one thread at a time (as with
 * NCCL), except ringoCommAbort and ringoCommGetAsyncError, which may be
 * called from any thread at any time. Functions that take no communicator
 * are thread-safe. ringoGetLastError is per thread.
 *
 * Completion: a host communicator (RINGO_DEVICE_HOST) finishes every
 * collective before the call returns, and its stream argument must be NULL.
 * A GPU communicator (RINGO_DEVICE_CUDA) enqueues each collective on the
 * stream (a cudaStream_t; NULL: the legacy default stream) and returns at
 * once; completion is the stream's. Ranks driven from one thread need
 * separate streams, since their kernels wait on each other. Inside a group (ringoGroupStart/End) operations are queued and run when
 * the outermost ringoGroupEnd is called.
 */
#ifndef RINGO_RINGO_H_
#define RINGO_RINGO_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define RINGO_API __attribute__((visibility("default")))
#else
#define RINGO_API
#endif

#define RINGO_MAJOR 0
#define RINGO_MINOR 1
#define RINGO_PATCH 0
/* ringoGetVersion reports MAJOR * 10000 + MINOR * 100 + PATCH. */
#define RINGO_VERSION_CODE (RINGO_MAJOR * 10000 + RINGO_MINOR * 100 + RINGO_PATCH)

/* Result codes; values equal NCCL's ncclResult_t. */
typedef enum {
  ringoSuccess = 0,
  ringoUnhandledCudaError = 1,
  ringoSystemError = 2,
  ringoInternalError = 3,
  ringoInvalidArgument = 4,
  ringoInvalidUsage = 5,
  ringoRemoteError = 6,
  ringoInProgress = 7,
  ringoTimeout = 8,
  ringoNumResults = 9
} ringoResult_t;

/* Datatypes; values equal NCCL's ncclDataType_t. */
typedef enum {
  ringoInt8 = 0,
  ringoChar = 0,
  ringoUint8 = 1,
  ringoInt32 = 2,
  ringoInt = 2,
  ringoUint32 = 3,
  ringoInt64 = 4,
  ringoUint64 = 5,
  ringoFloat16 = 6,
  ringoHalf = 6,
  ringoFloat32 = 7,
  ringoFloat = 7,
  ringoFloat64 = 8,
  ringoDouble = 8,
  ringoBfloat16 = 9,
  /* 8-bit floats (OCP E4M3 with no infinities, largest 448; E5M2, largest
   * 57344): reduced in fp32, each stored result rounded to nearest even and
   * saturated to the largest finite value (NaN stays NaN), as NCCL does. */
  ringoFloat8e4m3 = 10,
  ringoFloat8e5m2 = 11,
  ringoNumTypes = 12
} ringoDataType_t;

/* Reduction operators; values equal NCCL's ncclRedOp_t.
 * ringoAvg is the sum divided by the rank count: floating-point inputs are
 * multiplied by 1/nranks before they are summed; integer sums are divided
 * by nranks at the end, truncating toward zero. Values from ringoNumOps up
 * are operators made by ringoRedOpCreatePreMulSum. */
typedef enum {
  ringoSum = 0,
  ringoProd = 1,
  ringoMax = 2,
  ringoMin = 3,
  ringoAvg = 4,
  ringoNumOps = 5,
  ringoMaxRedOp = 0x7fffffff
} ringoRedOp_t;

/* Where a premul-sum's scalar is read (NCCL's ncclScalarResidence_t). */
typedef enum {
  ringoScalarDevice = 0,       /* read through the pointer when each collective runs */
  ringoScalarHostImmediate = 1 /* read (host memory) when the operator is made */
} ringoScalarResidence_t;

/* A CUDA stream (cudaStream_t converts to it implicitly); NULL for host
 * communicators. */
typedef void* ringoStream_t;

/* Opaque communicator handle. */
typedef struct ringoComm* ringoComm_t;

/* Rendezvous token: created by ringoGetUniqueId on one rank and given to
 * every rank by the application. Holds the root's address and a nonce. */
#define RINGO_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[RINGO_UNIQUE_ID_BYTES];
} ringoUniqueId;

/* Where a communicator's buffers live. */
typedef enum {
  RINGO_DEVICE_AUTO = 0, /* RINGO_DEVICE decides (host, cuda; default auto: a GPU where one is usable
                            by every rank, on one host or several) */
  RINGO_DEVICE_HOST = 1, /* host (CPU) memory */
  RINGO_DEVICE_CUDA = 2  /* GPU memory; ringoInvalidUsage where a rank has no usable GPU. Ring edges
                            between hosts go through pinned host memory and the network */
} ringoDeviceKind_t;

/* Wire formats of floating-point sums between hosts (docs/wire.md): fp32,
 * bf16 and fp16 sum and avg all-reduce and reduce-scatter on a host
 * communicator whose ranks span hosts cross the network in the format, each
 * rank's contribution rounded to it once and each result once, whatever the
 * rank count; every addition is in fp32, and contributions within a host
 * travel uncompressed. The 8-bit formats carry a power-of-two scale per 32
 * values. */
typedef enum {
  ringoWireNone = 0,    /* the buffer's own datatype: exact */
  ringoWireBf16 = 1,    /* 2 bytes a value */
  ringoWireFp16 = 2,    /* 2 bytes a value (past 65504: infinity) */
  ringoWireFp8e4m3 = 3, /* 1 byte a value + 1 byte per 32 values */
  ringoWireFp8e5m2 = 4
} ringoWire_t;

/* Communicator options. Initialise with RINGO_CONFIG_INITIALIZER, then set
 * fields; `size` and `version` let later versions grow the struct. */
typedef struct {
  size_t size;        /* sizeof(ringoConfig_t) */
  unsigned version;   /* RINGO_VERSION_CODE */
  int blocking;       /* 1: init returns when done; 0: init returns ringoInProgress,
                         poll ringoCommGetAsyncError until it is not ringoInProgress */
  int timeout_ms;     /* deadline of every wait on a peer; 0: RINGO_TIMEOUT_MS */
  int device_kind;    /* a ringoDeviceKind_t */
  int tagged_p2p;     /* 1: connect every pair of ranks at init for ringoSendTagged /
                         ringoRecvTagged (host communicators; any rank asking is
                         enough; a split or shrink without a config inherits it).
                         A config from a header without this field (a smaller
                         `size`) is accepted and reads it as 0. */
  int wire;           /* a ringoWire_t; -1 (the initializer's): RINGO_WIRE decides (default
                         none). A split or shrink without a config inherits the parent's.
                         A config from a header without this field reads it as -1. */
} ringoConfig_t;

#define RINGO_CONFIG_INITIALIZER \
  { sizeof(ringoConfig_t), RINGO_VERSION_CODE, 1, 0, RINGO_DEVICE_AUTO, 0, -1 }

/* Writes the library's version (RINGO_VERSION_CODE form). Thread-safe. */
RINGO_API ringoResult_t ringoGetVersion(int* version);

/* Creates a unique id: starts a listener in this process that serves one
 * communicator's rendezvous (it exits when that communicator is set up or
 * after the timeout). If RINGO_COMM_ID=host:port is set, writes an id naming
 * that address instead and starts no listener (rank 0's ringoCommInitRank
 * does). Blocks only to open the listener. Thread-safe. */
RINGO_API ringoResult_t ringoGetUniqueId(ringoUniqueId* unique_id);

/* An id naming the rendezvous `address` ("host:port", "[v6addr]:port"), as
 * RINGO_COMM_ID does: every rank that passes the same address gets the same
 * id, and rank 0's ringoCommInitRank listens there. For launchers that learn
 * the address at run time (torchrun's MASTER_ADDR). Starts nothing; does not
 * block. Thread-safe. */
RINGO_API ringoResult_t ringoGetUniqueIdForAddress(const char* address, ringoUniqueId* unique_id);

/* Creates rank `rank` of an `nranks`-rank communicator. Collective: blocks
 * until every rank has called it with the same id (or the timeout passes).
 * The ranks agree on host or GPU memory (RINGO_DEVICE, ringoDeviceKind_t); a
 * GPU rank uses the calling thread's current CUDA device. `*comm` is owned by
 * the caller and released with ringoCommDestroy or ringoCommAbort; for a GPU
 * communicator whose ranks are processes, ringoCommDestroy waits until the
 * ring predecessor has released its mapping of this rank's memory. */
RINGO_API ringoResult_t ringoCommInitRank(ringoComm_t* comm, int nranks, ringoUniqueId unique_id,
                                          int rank);

/* As ringoCommInitRank with options; config may be NULL (defaults). With
 * config->blocking == 0 returns ringoInProgress at once and completes in the
 * background; `*comm` is valid for ringoCommGetAsyncError and
 * ringoCommAbort only until that reports ringoSuccess. */
RINGO_API ringoResult_t ringoCommInitRankConfig(ringoComm_t* comm, int nranks,
                                                ringoUniqueId unique_id, int rank,
                                                const ringoConfig_t* config);

/* Creates `ndev` communicators in this process, rank i on CUDA device
 * devlist[i] (the same device may repeat; devlist NULL means device
 * i % (visible devices); host memory where there is no GPU, devlist then
 * ignored). Ranks exchange data in process (or device) memory. Blocks until
 * all are set up. */
RINGO_API ringoResult_t ringoCommInitAll(ringoComm_t* comms, int ndev, const int* devlist);

/* Finishes every operation issued on `comm`; afterwards only
 * ringoCommDestroy and the query functions are allowed. Blocking. */
RINGO_API ringoResult_t ringoCommFinalize(ringoComm_t comm);

/* Releases `comm` and everything it owns; the handle is invalid afterwards
 * (a later use returns ringoInvalidArgument). Not collective. */
RINGO_API ringoResult_t ringoCommDestroy(ringoComm_t comm);

/* Marks `comm` aborted, wakes and fails any operation blocked on it (its
 * peers see ringoRemoteError), waits for that operation to return, then
 * releases `comm` like ringoCommDestroy. Any thread. */
RINGO_API ringoResult_t ringoCommAbort(ringoComm_t comm);

/* The first asynchronous error of `comm` (a peer failure, a timeout), or
 * ringoInProgress while a non-blocking init runs. Any thread; non-blocking. */
RINGO_API ringoResult_t ringoCommGetAsyncError(ringoComm_t comm, ringoResult_t* async_error);

/* Writes the flight record of `comm` on this rank (its last
 * RINGO_TRACE_BUFFER operations: arguments, group, when called, started and
 * finished, state) as JSON lines into the folder `dir`, or RINGO_TRACE_DIR
 * when dir is NULL: ringo-trace-<communicator>-rank<r>.jsonl, replacing an
 * earlier one (docs/diagnosis.md). ringoInvalidUsage when no
 * folder is named or the recorder is off (RINGO_TRACE_BUFFER=0). Any
 * thread. */
RINGO_API ringoResult_t ringoCommDumpTrace(ringoComm_t comm, const char* dir);

/* Names the operations the calling thread issues next on `comm` in the
 * flight record (up to 23 bytes; NULL or "" stops naming), e.g. the name a
 * framework gave the call that made them. */
RINGO_API ringoResult_t ringoCommSetTraceLabel(ringoComm_t comm, const char* label);

/* Rank count, this rank, and CUDA device (-1 for a host communicator). */
RINGO_API ringoResult_t ringoCommCount(const ringoComm_t comm, int* count);
/* Sets the wire format (a ringoWire_t) of `comm`'s collectives from the next
 * one on. Every rank must set the same, between the same two collectives.
 * ringoInvalidArgument for another value; ringoInvalidUsage on a GPU
 * communicator unless RINGO_GPU_WIRE=1 built its wire engine (docs/wire.md).
 * Not collective; does not block. */
RINGO_API ringoResult_t ringoCommSetWire(ringoComm_t comm, int wire);
/* The wire format `comm`'s next collective uses. */
RINGO_API ringoResult_t ringoCommGetWire(const ringoComm_t comm, int* wire);
/* Writes to recvbuff what this rank's sendbuff (count elements of datatype)
 * amounts to once sent in `comm`'s wire format as its contribution to
 * ringoAllReduce(sendbuff, ..., count, datatype, op, comm): the parts bound
 * for ranks on other hosts rounded exactly as that call rounds them, the
 * rest copied; a plain copy where the call would not compress. So
 * sendbuff - recvbuff is what the wire loses of this rank's contribution,
 * for error feedback (adding it to the next step's input). In the input's
 * units (avg included). In place allowed. Host communicators; local (no
 * peer takes part), not a collective. */
RINGO_API ringoResult_t ringoCommWireRound(const void* sendbuff, void* recvbuff, size_t count,
                                           ringoDataType_t datatype, ringoRedOp_t op, ringoComm_t comm);
RINGO_API ringoResult_t ringoCommUserRank(const ringoComm_t comm, int* rank);
RINGO_API ringoResult_t ringoCommCuDevice(const ringoComm_t comm, int* device);

/* Host memory for collectives that every process of this host can map
 * (a memfd, shared with the other ranks' processes through /proc/<pid>/fd;
 * zeroed, page-aligned). A large collective on a host communicator whose
 * ranks pass such buffers (those the other ranks read or write: for an
 * AllReduce all of them, for a Broadcast the root's input), or whose ranks
 * are threads of one process whatever their buffers, runs straight on every
 * rank's buffers, without the ring's FIFO copies (docs/api.md: "Direct
 * collectives"). Other buffers work as always (through the ring). Peers
 * keep a mapping of the regions they have used (up to 64 per communicator),
 * so freed memory is returned to the system when the communicator is
 * destroyed. ringoInvalidArgument for size 0 or a NULL
 * ptr; ringoSystemError when the system refuses. Thread-safe. */
RINGO_API ringoResult_t ringoMemAlloc(void** ptr, size_t size);
/* Frees what ringoMemAlloc returned (ringoInvalidArgument for anything else). */
RINGO_API ringoResult_t ringoMemFree(void* ptr);

/* A static string naming `result`. Thread-safe. */
RINGO_API const char* ringoGetErrorString(ringoResult_t result);

/* The message of the last failed call made by this thread (on `comm`, or on
 * any communicator when comm is NULL); "" when there is none. The string is
 * owned by Ringo and valid until this thread's next Ringo call. */
RINGO_API const char* ringoGetLastError(ringoComm_t comm);

/* Collectives. `count` is in elements of `datatype`; sendbuff == recvbuff is
 * in place. Host communicators: stream must be NULL; the call returns when
 * the collective is complete on this rank (or when queued, inside a group).
 * Every rank must issue the same collectives in the same order. */

/* recvbuff[i] = op over ranks of sendbuff[i], for i < count, on every rank. */
RINGO_API ringoResult_t ringoAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                       ringoDataType_t datatype, ringoRedOp_t op,
                                       ringoComm_t comm, ringoStream_t stream);

/* recvbuff[i] = op over ranks of sendbuff[rank * recvcount + i], i < recvcount.
 * In place: recvbuff == sendbuff + rank * recvcount elements. */
RINGO_API ringoResult_t ringoReduceScatter(const void* sendbuff, void* recvbuff,
                                           size_t recvcount, ringoDataType_t datatype,
                                           ringoRedOp_t op, ringoComm_t comm,
                                           ringoStream_t stream);

/* recvbuff[r * sendcount + i] = sendbuff of rank r [i].
 * In place: sendbuff == recvbuff + rank * sendcount elements. */
RINGO_API ringoResult_t ringoAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                       ringoDataType_t datatype, ringoComm_t comm,
                                       ringoStream_t stream);

/* recvbuff = sendbuff of `root` on every rank (sendbuff is read on root only). */
RINGO_API ringoResult_t ringoBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                       ringoDataType_t datatype, int root, ringoComm_t comm,
                                       ringoStream_t stream);

/* recvbuff on `root` = op over ranks of sendbuff (recvbuff is written on root only). */
RINGO_API ringoResult_t ringoReduce(const void* sendbuff, void* recvbuff, size_t count,
                                    ringoDataType_t datatype, ringoRedOp_t op, int root,
                                    ringoComm_t comm, ringoStream_t stream);

/* Point-to-point (defined when this header has it, for code that adapts). */
#define RINGO_HAS_P2P 1

/* Sends `count` elements from sendbuff to rank `peer`, which must post the
 * matching ringoRecv (the same size in bytes). Sends and receives between
 * two ranks match in issue order, per direction; any two ranks may exchange
 * messages (a connection is made the first time a pair is used, and kept);
 * count 0 is a message too. Host communicators: returns once the data has
 * left sendbuff (small messages before the receiver posts its receive, large
 * ones as it receives them). Sends and receives that must progress together
 * (a rank that sends to and receives from a peer, rings of exchanges) go in
 * one ringoGroupStart/End: the group runs them all at once. A send to
 * oneself must meet its receive in the same group. GPU communicators
 * enqueue on `stream` (a group's sends and receives as one kernel, at most
 * 256 operations) and return at once; the first use of a pair connects it on
 * the host, which waits for the peer to reach its matching call. */
RINGO_API ringoResult_t ringoSend(const void* sendbuff, size_t count, ringoDataType_t datatype, int peer,
                                  ringoComm_t comm, ringoStream_t stream);
/* Receives `count` elements from rank `peer` into recvbuff (see ringoSend). */
RINGO_API ringoResult_t ringoRecv(void* recvbuff, size_t count, ringoDataType_t datatype, int peer,
                                  ringoComm_t comm, ringoStream_t stream);

/* Tagged point-to-point (defined when this header has it). */
#define RINGO_HAS_TAGGED 1
/* ringoRecvTagged's peer for a message from any rank. */
#define RINGO_ANY_SOURCE -1

/* Tagged messages, on host communicators made with config->tagged_p2p = 1:
 * a message sent to rank r with tag t (>= 0) is taken by the first
 * ringoRecvTagged rank r posts with tag t from this rank or from
 * RINGO_ANY_SOURCE; messages of one sender with one tag are taken in the
 * order sent; the sizes in bytes must agree. A stream of its own, apart
 * from ringoSend/ringoRecv's. Blocking, and not in groups: a send returns
 * once its bytes are in the receiver's FIFO or taken (a message larger than
 * the FIFO waits for the receiver's tagged calls), a receive once it holds
 * its message. While either waits, it takes in whatever other ranks send
 * this rank (held until a receive asks for it), so ranks that send to each
 * other at once do not deadlock. A send to oneself is held for a later
 * receive. `stream` must be NULL. */
RINGO_API ringoResult_t ringoSendTagged(const void* sendbuff, size_t count, ringoDataType_t datatype, int peer,
                                        int tag, ringoComm_t comm, ringoStream_t stream);
/* Receives the first message with `tag` from `peer` (or RINGO_ANY_SOURCE)
 * into recvbuff; the sender's rank in *source (may be NULL). A matching
 * message of another size is ringoInvalidUsage and stays queued. */
RINGO_API ringoResult_t ringoRecvTagged(void* recvbuff, size_t count, ringoDataType_t datatype, int peer, int tag,
                                        int* source, ringoComm_t comm, ringoStream_t stream);

/* recvbuff[r * count + i] = sendbuff of rank r [rank * count + i]: each rank
 * sends block p of its input to rank p. In place (sendbuff == recvbuff)
 * allowed on host communicators. */
RINGO_API ringoResult_t ringoAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                                      ringoDataType_t datatype, ringoComm_t comm, ringoStream_t stream);
/* On `root`: recvbuff[r * count + i] = sendbuff of rank r [i]; recvbuff is
 * not used elsewhere (may be NULL). In place: sendbuff == recvbuff + root *
 * count elements on root. */
RINGO_API ringoResult_t ringoGather(const void* sendbuff, void* recvbuff, size_t count,
                                    ringoDataType_t datatype, int root, ringoComm_t comm,
                                    ringoStream_t stream);
/* recvbuff = block `rank` of root's sendbuff (count elements each);
 * sendbuff is read on root only (may be NULL elsewhere). In place:
 * recvbuff == sendbuff + root * count elements on root. */
RINGO_API ringoResult_t ringoScatter(const void* sendbuff, void* recvbuff, size_t count,
                                     ringoDataType_t datatype, int root, ringoComm_t comm,
                                     ringoStream_t stream);

/* A color that puts this rank in no child of ringoCommSplit (any negative
 * color does). */
#define RINGO_SPLIT_NOCOLOR -1

/* Splits `comm`: collective over its ranks, each passing a color and a key;
 * the ranks of one color form a child communicator, ranked by key, then by
 * their rank in `comm`. *newcomm is this rank's child (NULL for a negative
 * color). No unique id is needed: the children are set up over `comm`'s
 * connections, and live on after `comm` is destroyed. config NULL: the child
 * inherits comm's timeout and memory kind (a GPU child on comm's device).
 * Blocking; inside a group, every split queued for the group's
 * communicators runs at ringoGroupEnd (so one thread may split every rank
 * of a ringoCommInitAll set), and *newcomm is written then. */
RINGO_API ringoResult_t ringoCommSplit(ringoComm_t comm, int color, int key, ringoComm_t* newcomm,
                                       const ringoConfig_t* config);

/* Elastic communicators (docs/elastic.md).
 *
 * The ranks of `comm` that are still alive agree on which ranks failed
 * (died, stopped, or cut off: they do not answer within
 * RINGO_CONTROL_TIMEOUT_MS), over the control connections, whatever state
 * the collectives are in: collective among the live ranks, it writes the
 * same sorted list on each into failedRanks (room for ringoCommCount
 * entries) and its length into *failedCount. A rank named by the list that
 * is in fact alive hears so and fails every later call on `comm` with
 * ringoInvalidUsage saying it was excluded. Blocking. */
RINGO_API ringoResult_t ringoCommAgreeFailed(ringoComm_t comm, int* failedRanks, int* failedCount);

/* ringoCommShrink's flags: DEFAULT for a healthy communicator with no
 * operation in flight (or a revoked one); ABORT for one that failed or has
 * work in flight (that work is aborted on every rank; nothing is shared). */
#define RINGO_SHRINK_DEFAULT 0x00
#define RINGO_SHRINK_ABORT 0x01

/* A communicator of the ranks of `comm` not in excludeRanksList (their
 * ranks in `comm`), renumbered in order: only those ranks call it, whether
 * the excluded ones died, stopped or are alive and left out. No unique id
 * is needed (it is made over `comm`'s control connections); it may be
 * called again on the child after a second failure. config NULL: the child
 * inherits comm's timeout and memory kind; config->blocking 0: returns
 * ringoInProgress at once and the child is ready when
 * ringoCommGetAsyncError(*newcomm) says so, as for init. */
RINGO_API ringoResult_t ringoCommShrink(ringoComm_t comm, int* excludeRanksList, int excludeRanksCount,
                                        ringoComm_t* newcomm, ringoConfig_t* config, int shrinkFlags);

#define RINGO_REVOKE_DEFAULT 0x00
/* Stops what runs on `comm` on every rank (each rank's running call fails,
 * naming this one) and returns once this rank's has returned; frees
 * nothing. Later collectives on `comm` are ringoInvalidUsage; destroy,
 * shrink and split remain. Any thread, like ringoCommAbort. revokeFlags:
 * RINGO_REVOKE_DEFAULT. */
RINGO_API ringoResult_t ringoCommRevoke(ringoComm_t comm, int revokeFlags);

/* Growing: one existing rank gets an id for the grown communicator here
 * and hands it to the new ranks (a file, the environment, the launcher);
 * single use. */
RINGO_API ringoResult_t ringoCommGetUniqueId(ringoComm_t comm, ringoUniqueId* uniqueId);
/* The communicator of `comm`'s ranks and new ones, nRanks in all: existing
 * ranks pass comm and rank -1 (they keep their ranks; the one that called
 * ringoCommGetUniqueId passes the id, the others NULL); new ranks pass
 * comm NULL, the id and their rank, numbered from comm's rank count up.
 * `comm` must have no operation in flight; it stays usable. Collective over
 * all nRanks ranks. config as for ringoCommShrink. */
RINGO_API ringoResult_t ringoCommGrow(ringoComm_t comm, int nRanks, const ringoUniqueId* uniqueId, int rank,
                                      ringoComm_t* newcomm, ringoConfig_t* config);

/* Makes a reduction operator for collectives of `datatype` on `comm`: each
 * rank's input multiplied by that rank's own scalar (one value of
 * `datatype` at `scalar`), then summed (integers wrap, floating types are
 * multiplied and summed in fp32 or wider and rounded as ringoSum's).
 * ringoScalarHostImmediate reads the scalar now (host memory);
 * ringoScalarDevice reads it when each collective runs: on a GPU
 * communicator the kernel reads it from memory of the communicator's device
 * (so it may be written by earlier work on the stream); on a host
 * communicator the call reads it (host or GPU memory). *op receives the
 * handle (ringoNumOps or more), valid on `comm` until ringoRedOpDestroy. Not
 * collective; every rank makes its own. Thread-safe per communicator. */
RINGO_API ringoResult_t ringoRedOpCreatePreMulSum(ringoRedOp_t* op, void* scalar, ringoDataType_t datatype,
                                                  ringoScalarResidence_t residence, ringoComm_t comm);
/* Destroys an operator made by ringoRedOpCreatePreMulSum on `comm` (once the
 * last call that used it has returned). */
RINGO_API ringoResult_t ringoRedOpDestroy(ringoRedOp_t op, ringoComm_t comm);

/* Groups: operations issued by this thread between ringoGroupStart and the
 * matching ringoGroupEnd are queued and run at ringoGroupEnd, in issue order
 * per communicator and concurrently across communicators (so one thread may
 * drive every rank of a ringoCommInitAll set). On each communicator the
 * collectives (and splits) run first, in issue order, then every send and
 * receive of the group as one batch that progresses together. Groups nest;
 * the outermost ringoGroupEnd runs them and blocks until they finish,
 * returning the first error. Per thread. */
RINGO_API ringoResult_t ringoGroupStart(void);
RINGO_API ringoResult_t ringoGroupEnd(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* RINGO_RINGO_H_ */
