// Compiles (the connector's headers bring the FIFO's along), but
// check_layers.py refuses it: fifo.h belongs to //transport/fifo, which this
// target does not depend on.
#include "transport/connect/connector.h"
#include "transport/fifo/fifo.h"
