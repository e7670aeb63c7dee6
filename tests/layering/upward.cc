// Must not build: the engines are visible to the communicator only.
#include "collectives/engines/engine.h"
