// Placeholder until the CPU kernels land.
#include "lib/backend.h"
