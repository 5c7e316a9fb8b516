#include "pricing/rules.h"
