// Must not build: the communicator is visible to the C API's package only.
#include "collectives/communicator.h"
