#include "pricing/pricing.h"
