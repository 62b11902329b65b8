# The app the mixed-stress and soak harness drives (stress/main.go).
require "json"

CHUNK = ("s" * 65536).freeze

run lambda { |env|
  case env["PATH_INFO"]
  when "/noop"
    [200, { "content-type" => "text/plain" }, ["ok"]]
  when "/wait200"
    sleep 0.2
    [200, { "content-type" => "text/plain" }, ["waited"]]
  when "/upload"
    input = env["rack.input"]
    size = 0
    buf = String.new
    size += buf.bytesize while input.read(65536, buf)
    [200, { "content-type" => "text/plain" }, [size.to_s]]
  when "/stream"
    [200, { "content-type" => "application/octet-stream" },
     Enumerator.new { |y| 16.times { y << CHUNK; sleep 0.01 } }]
  when "/stats"
    3.times { GC.start(full_mark: true, immediate_sweep: true) }
    [200, { "content-type" => "application/json" },
     [JSON.generate("heap_live_slots" => GC.stat(:heap_live_slots))]]
  else
    [404, { "content-type" => "text/plain" }, ["not found"]]
  end
}
