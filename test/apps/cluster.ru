# The app the cluster-mode tests run in worker processes (test/cluster_test.go).
require "digest"
require "fiddle"

# A blocking C call: Fiddle lets the GVL go, but the worker's VM thread
# stays in the call, so no other request runs there meanwhile.
USLEEP = Fiddle::Function.new(Fiddle.dlopen(nil)["usleep"], [Fiddle::TYPE_INT], Fiddle::TYPE_INT)
GROWN = []
BIG = ("x" * (1 << 20)).freeze

if File.exist?(ENV.fetch("CLUSTER_BOOT_FAILS", "/nonexistent"))
  raise "this worker is told to fail its boot"
end
sleep 3 if File.exist?(ENV.fetch("CLUSTER_BOOT_SLOW", "/nonexistent"))
# Which process loaded the app (with --preload, the template), and each
# boot's pid and VERSION file, one line each (test/preload_test.go).
BOOT_PID = Process.pid
VERSION = File.exist?(ENV.fetch("CLUSTER_VERSION", "/nonexistent")) ? File.read(ENV["CLUSTER_VERSION"]).strip : "none"
File.open(ENV["CLUSTER_BOOT_LOG"], "a") { |f| f.puts "#{Process.pid} #{VERSION}" } if ENV["CLUSTER_BOOT_LOG"]
# Each process whose Ruby was cleaned up (its at_exit hooks ran), one pid a
# line: with --preload, the template and every worker forked from it.
at_exit { File.open(ENV["CLUSTER_EXIT_LOG"], "a") { |f| f.puts Process.pid } } if ENV["CLUSTER_EXIT_LOG"]

use Rack::Lint
run lambda { |env|
  req = Rack::Request.new(env)
  text = { "content-type" => "text/plain" }
  case req.path_info
  when "/pid"
    [200, text, [Process.pid.to_s]]
  when "/boot"
    [200, text, ["#{BOOT_PID} #{VERSION}"]]
  when "/orphan"
    # A child the app leaves behind: it outlives the worker when the
    # worker exits first.
    pid = Process.spawn("sleep", req.params.fetch("s", "1"))
    [200, text, [pid.to_s]]
  when "/sleep"
    sleep Float(req.params.fetch("s", "1"))
    [200, text, [Process.pid.to_s]]
  when "/block"
    # usleep returns early when the stall detector's signal lands: go on.
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + Float(req.params.fetch("s", "1"))
    while (left = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)) > 0
      USLEEP.call((left * 1_000_000).to_i)
    end
    [200, text, [Process.pid.to_s]]
  when "/crash"
    Process.kill(:KILL, Process.pid)
    sleep 10
  when "/exit"
    exit!(7)
  when "/grow"
    GROWN << ("x" * Integer(req.params.fetch("mib", "64")) * 1024 * 1024)
    [200, text, [Process.pid.to_s]]
  when "/leak"
    # An app that leaks: each request keeps 200 KB.
    GROWN << ("x" * 200_000)
    [200, text, [Process.pid.to_s]]
  when "/file"
    Rack::Files.new(File.expand_path(".", __dir__)).call(env.merge("PATH_INFO" => "/file.txt"))
  when "/upload"
    body = env["rack.input"].read
    [200, text, ["#{body.bytesize} #{Digest::SHA256.hexdigest(body)}"]]
  when "/stream-held"
    # The second chunk comes after a second of Ruby that never yields.
    body = Enumerator.new do |y|
      y << "first\n"
      began = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      x = 0
      x += 1 while Process.clock_gettime(Process::CLOCK_MONOTONIC) - began < 1.0
      y << "second\n"
    end
    [200, text, body]
  when "/hold"
    # A connection the app takes over (partial hijack): it echoes 5-byte
    # messages until the client closes, after telling which worker holds it.
    echo = lambda do |io|
      io.write("#{Process.pid}\n")
      while (message = io.read(5))
        io.write(message)
      end
    ensure
      io.close
    end
    [200, { "content-type" => "text/plain", "rack.hijack" => echo }, []]
  when "/big"
    [200, text, [BIG]]
  when "/stream"
    body = Enumerator.new { |y| 5.times { |i| y << "chunk #{i}\n"; sleep 0.01 } }
    [200, text, body]
  else
    [404, text, ["not found"]]
  end
}
