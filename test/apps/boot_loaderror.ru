require "no_such_library_for_ruvoy"
run ->(env) { [200, {}, []] }
