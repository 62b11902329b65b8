# Ruvoy.warm's app (test/warm_test.go): the paths the answering process
# has served, the template's warm-up requests among them when it was
# forked from a warmed template, and what Ruvoy.warm returned there.
require "json"

SERVED = []
WARMED = {}
AT_LOAD = Ruvoy.warm("/at-load") # not in a template yet: does nothing
Ruvoy.before_fork { WARMED.merge!(Ruvoy.warm("/", "/missing", times: 3)) }

run lambda { |env|
  SERVED << env["PATH_INFO"]
  status = env["PATH_INFO"] == "/missing" ? 404 : 200
  [status, { "content-type" => "application/json" },
   [JSON.generate(pid: Process.pid, served: SERVED, warmed: WARMED, at_load: AT_LOAD)]]
}
