# A C extension for the offload tests and benchmarks: calls that block
# for N ms, with and without releasing the GVL. Built at test time.
require "mkmf"
create_makefile("blocking")
