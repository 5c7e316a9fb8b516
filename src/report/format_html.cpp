#include "report/format.h"
