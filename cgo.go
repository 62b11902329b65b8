package ruvoy

// The C side is compiled with the system Ruby's flags, which the build takes
// from RbConfig (build/rbconfig.sh sets CGO_CFLAGS and CGO_LDFLAGS): nothing
// here names a Ruby version or path.

/*
#cgo CFLAGS: -O2 -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers
#include <stdlib.h>
#include "ruvoy.h"
*/
import "C"
