# The fixtures every server in the benchmark serves (bench/main.go).
# Blocking is the test-only C extension (test/ext/blocking), built by the
# benchmark: 50 ms calls that block after releasing the GVL, as database
# drivers' synchronous calls do.
$LOAD_PATH.unshift(ENV.fetch("RUVOY_TEST_EXT"))
require "blocking"

MIB = ("x" * (1 << 20)).freeze

# Files for the file-body scenarios, made once and shared by every server:
# Rack::Files answers with a to_path body (sendfile where a server has it).
require "tmpdir"
FILES_DIR = File.join(Dir.tmpdir, "ruvoy-bench-files")
Dir.mkdir(FILES_DIR) unless Dir.exist?(FILES_DIR)
{ "1mib.bin" => 1 << 20, "16mib.bin" => 16 << 20 }.each do |name, size|
  path = File.join(FILES_DIR, name)
  next if File.size?(path) == size
  File.binwrite("#{path}.#{Process.pid}", "x" * size)
  File.rename("#{path}.#{Process.pid}", path)
end
FILES = Rack::Files.new(FILES_DIR)

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
  when "/file1mib", "/file16mib"
    FILES.call(env.merge("PATH_INFO" => "/#{env["PATH_INFO"].delete_prefix("/file")}.bin"))
  else
    [404, { "content-type" => "text/plain" }, ["not found\n"]]
  end
}
