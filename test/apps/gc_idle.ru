# The app the --gc-when-idle tests talk to (test/gc_idle_test.go):
# requests that leave garbage behind, one that waits in the scheduler with
# nothing to allocate, and Ruby's figures with each answer.
require "json"

# Old objects: a major collection marks them all, a minor does not, so
# here a major takes several times as long as a minor (about 60 against
# 9 ms on the test machine): the bound tells one from the other.
OLD = Array.new(Integer(ENV.fetch("GC_IDLE_OLD", "1000000"))) { |i| [i] }
4.times { GC.start } # old once they have lived through three

$young = nil

def figures
  s = GC.stat
  { "pid" => Process.pid, "count" => s[:count], "major" => s[:major_gc_count], "idle" => Ruvoy._gc_idle_count }
end

def json(obj) = [200, { "content-type" => "application/json" }, [JSON.generate(obj)]]

run lambda { |env|
  params = Rack::Utils.parse_query(env["QUERY_STRING"])
  case env["PATH_INFO"]
  when "/garbage"
    # n objects that die with the request, and young ones kept until the
    # next starts (not longer: they would grow old), which a minor between
    # requests marks.
    $young = nil
    Integer(params.fetch("n", "700000")).times { +"garbage" }
    $young = Array.new(Integer(params.fetch("young", "100000"))) { [] }
    json(figures)
  when "/figures"
    json(figures)
  when "/sleep"
    # Waits in the scheduler, allocating nothing: the VM thread is idle
    # with this request in flight.
    before = figures
    sleep Integer(params.fetch("ms", "1000")) / 1000.0
    json("before" => before, "after" => figures)
  when "/major"
    t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    GC.start(full_mark: true, immediate_sweep: false)
    json(figures.merge("ms" => (Process.clock_gettime(Process::CLOCK_MONOTONIC) - t) * 1000))
  else
    [404, {}, []]
  end
}
