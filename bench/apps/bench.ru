# The fixtures every server in the benchmark serves (bench/main.go).
# Blocking is the test-only C extension (test/ext/blocking), built by the
# benchmark: 50 ms calls that block after releasing the GVL, as database
# drivers' synchronous calls do.
$LOAD_PATH.unshift(ENV.fetch("RUVOY_TEST_EXT"))
require "blocking"

MIB = ("x" * (1 << 20)).freeze

run lambda { |env|
  case env["PATH_INFO"]
  when "/"
    [200, { "content-type" => "text/plain" }, ["hello world\n"]]
  when "/stream"
    # First chunk at once, the rest after 50 ms: time to first byte shows
    # whether a server forwards chunks as they come.
    [200, { "content-type" => "text/plain" }, Enumerator.new { |y| y << "first\n"; sleep 0.05; y << "second\n" }]
  when "/upload"
    input = env["rack.input"]
    size = 0
    buf = String.new
    size += buf.bytesize while input.read(65536, buf)
    [200, { "content-type" => "text/plain" }, [size.to_s]]
  when "/block50"
    Blocking.sleep_nogvl(50)
    [200, { "content-type" => "text/plain" }, ["blocked\n"]]
  when "/block50-offload"
    # Under ruvoy the call moves to an offload thread; other servers have
    # no Ruvoy and block their request thread, as they always do.
    defined?(Ruvoy) ? Ruvoy.offload { Blocking.sleep_nogvl(50) } : Blocking.sleep_nogvl(50)
    [200, { "content-type" => "text/plain" }, ["blocked\n"]]
  when "/wait50"
    sleep 0.05
    [200, { "content-type" => "text/plain" }, ["waited\n"]]
  when "/wait200"
    sleep 0.2
    [200, { "content-type" => "text/plain" }, ["waited\n"]]
  when "/cpu"
    # About 3 ms of Ruby on this machine (Ruby 3.1, no JIT).
    x = 0
    75_000.times { |i| x += i * i }
    [200, { "content-type" => "text/plain" }, ["#{x}\n"]]
  when "/1mib"
    [200, { "content-type" => "application/octet-stream", "content-length" => MIB.bytesize.to_s }, [MIB]]
  else
    [404, { "content-type" => "text/plain" }, ["not found\n"]]
  end
}
