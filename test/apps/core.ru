# The app the core end-to-end tests talk to (test/core_test.go). Everything
# runs under Rack::Lint except /malformed, whose answers Lint would reject
# before the server saw them.
require "json"
require "net/http"
require "timeout"
require "socket"

$stdout.sync = true
puts "core.ru loading: $0=#{$0} ARGV=#{ARGV.inspect} RACK_ENV=#{ENV["RACK_ENV"]}"
warn "core.ru warning on stderr"
at_exit { puts "core.ru at_exit ran" }

CLOSED = Hash.new(0)
FINISHED = []

# A body that counts its close calls under a name.
class CountedBody
  def initialize(name, chunks, raise_after: nil)
    @name, @chunks, @raise_after = name, chunks, raise_after
  end

  def each
    @chunks.each_with_index do |chunk, i|
      raise "each failed after #{i} chunks" if @raise_after == i
      yield chunk
    end
  end

  def close
    CLOSED[@name] += 1
  end
end

# A body Go sends from the file (to_path). Its each yields other bytes, so
# that a test can tell the file was sent rather than each called.
class FileBody
  def initialize(path) = @path = path
  def to_path = @path
  def each = yield("read by each, not sent by Go\n")
  def close = CLOSED["file"] += 1
end

def text(body, status = 200, headers = {})
  [status, { "content-type" => "text/plain" }.merge(headers), [body]]
end

def env_report(env)
  report = env.select { |k, v| v.is_a?(String) }
  %w[rack.version rack.url_scheme rack.multithread rack.multiprocess rack.run_once rack.hijack?].each do |k|
    report[k] = env[k]
  end
  report["rack.errors"] = %i[puts write flush].all? { |m| env["rack.errors"].respond_to?(m) }
  report["rack.after_reply"] = env["rack.after_reply"].class.name
  report["rack.response_finished"] = env["rack.response_finished"].class.name
  report["input"] = env["rack.input"].read
  report["input_encoding"] = report["input"].encoding.name
  report
end

def live_objects
  3.times { GC.start(full_mark: true, immediate_sweep: true) }
  ObjectSpace.count_objects[:TOTAL] - ObjectSpace.count_objects[:FREE]
end

app = lambda do |env|
  query = Rack::Utils.parse_query(env["QUERY_STRING"])
  case env["PATH_INFO"]
  when %r{\A/env}, "*", ""
    [200, { "content-type" => "application/json" }, [JSON.generate(env_report(env))]]
  when "/gc"
    # Full collections for the given seconds of wall time; answers how long.
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    deadline = started + Float(query.fetch("s", "0.5"))
    GC.start(full_mark: true, immediate_sweep: true) while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
    text format("%.6f", Process.clock_gettime(Process::CLOCK_MONOTONIC) - started)
  when "/sleep"
    sleep Float(query.fetch("s", "0.2"))
    text "slept"
  when "/pipe"
    r, w = IO.pipe
    Fiber.schedule { sleep 0.2; w.write("piped"); w.close }
    data = r.read
    r.close
    text data
  when "/http"
    text Net::HTTP.get(URI(query.fetch("url")))
  when "/timeout"
    begin
      Timeout.timeout(0.05) { sleep 5 }
      text "no timeout"
    rescue Timeout::Error
      text "timed out"
    end
  when "/queue"
    queue = Queue.new
    mutex = Mutex.new
    cond = ConditionVariable.new
    ready = false
    Fiber.schedule { sleep 0.1; queue << "queued" }
    Fiber.schedule { sleep 0.1; mutex.synchronize { ready = true; cond.signal } }
    mutex.synchronize { cond.wait(mutex) until ready }
    text "#{queue.pop} signalled"
  when "/fiber-local"
    # What a request leaves in fiber-locals must not reach the next one,
    # even on a fiber the server reuses.
    was = Thread.current[:core_local]
    Thread.current[:core_local] = env["QUERY_STRING"]
    sleep 0.01
    text "was=#{was.inspect} fiber=#{Fiber.current.object_id}"
  when "/thread"
    text Thread.new { sleep 0.1; "from thread" }.value
  when "/dns"
    text Addrinfo.getaddrinfo("localhost", 80, nil, :STREAM).map(&:ip_address).sort.uniq.join(",")
  when "/spawn"
    pid = spawn("sleep 0.2")
    Process.wait(pid)
    text "exit #{$?.exitstatus}"
  when "/deep"
    # Deep stacks as Rails makes them: Ruby frames and C frames (each).
    recurse = ->(n) { n.zero? ? 0 : [n].each { |m| return 1 + recurse.(m - 1) } }
    text recurse.(Integer(query.fetch("depth"))).to_s
  when "/raise"
    raise ArgumentError, "raised on purpose"
  when "/counted"
    [200, { "content-type" => "text/plain" }, CountedBody.new(query.fetch("name"), ["one", "two"])]
  when "/raise-each"
    [200, { "content-type" => "text/plain" },
     CountedBody.new(query.fetch("name"), ["one", "two"], raise_after: Integer(query.fetch("after")))]
  when "/raise-late"
    body = CountedBody.new(query.fetch("name"), Enumerator.new { |y| y << "one"; sleep 0.05; raise "late failure" })
    [200, { "content-type" => "text/plain" }, body]
  when "/slow-counted"
    body = CountedBody.new(query.fetch("name"), Enumerator.new { |y| 100.times { y << ("x" * 1024); sleep 0.01 } })
    [200, { "content-type" => "text/plain" }, body]
  when "/closed"
    text CLOSED.fetch(query.fetch("name"), 0).to_s
  when "/finished"
    env["rack.response_finished"] << lambda do |e, status, headers, error|
      FINISHED << { "name" => query["name"], "status" => status, "error" => error&.class&.name }
    end
    env["rack.after_reply"] << -> { FINISHED << { "name" => "#{query["name"]}-after-reply" } }
    sleep Float(query.fetch("s", "0"))
    text "finished"
  when "/finished-log"
    [200, { "content-type" => "application/json" }, [JSON.generate(FINISHED)]]
  when "/stats"
    fds = Dir.children("/proc/self/fd").size
    [200, { "content-type" => "application/json" },
     [JSON.generate("live_objects" => live_objects, "fds" => fds, "threads" => Thread.list.size)]]
  when "/headers"
    # Several values: lines of one String in Rack 2, an Array in Rack 3.
    multi = ->(*values) { Rack.release.to_i >= 3 ? values : values.join("\n") }
    [200, { "content-type" => "text/plain", "set-cookie" => multi.("a=1", "b=2"), "x-multi" => multi.("x", "y") }, ["ok"]]
  else
    text "not found: #{env["PATH_INFO"]}", 404
  end
end

# Answers that skip Lint: Lint would refuse the malformed ones before the
# server saw them, and it wraps every body in an object with only each and
# close (no Array and no to_path reaches the server).
raw = lambda do |env|
  case env["PATH_INFO"].delete_prefix("/raw")
  when "/hello" then [200, { "content-type" => "text/plain" }, ["hello", " ", "world"]]
  when "/file" then [200, { "content-type" => "text/plain" }, FileBody.new(File.join(__dir__, "file.txt"))]
  when "/proxy" # an Array in a BodyProxy, as Rails' middleware returns it
    parts = ["a" * 3000, "b" * 3000] # more than Go buffers before it chooses chunked encoding
    [200, { "content-type" => "text/plain" }, Rack::BodyProxy.new(parts) { CLOSED["proxy"] += 1 }]
  when "/to-ary-raises"
    body = Rack::BodyProxy.new(Object.new) { CLOSED["to-ary"] += 1 }
    def body.to_ary = raise("to_ary failed")
    [200, { "content-type" => "text/plain" }, body]
  when "", "*" then CLOSED["options"] += 1; [200, {}, ["called"]]
  else [404, {}, ["not found"]]
  end
end

malformed = lambda do |env|
  case env["PATH_INFO"].delete_prefix("/malformed")
  when "/status" then ["two hundred", { "content-type" => "text/plain" }, ["x"]]
  when "/status-range" then [99, {}, ["x"]]
  when "/chunk" then [200, { "content-type" => "text/plain" }, [:symbol]]
  when "/header-crlf" then [200, { "x-evil" => "a\r\nset-cookie: injected=1" }, ["x"]]
  when "/header-nul" then [200, { "x-evil" => "a\0b" }, ["x"]]
  when "/header-name" then [200, { "x evil" => "a" }, ["x"]]
  when "/not-triple" then [200, {}]
  when "/nil" then nil
  when "/body" then [200, {}, Object.new]
  when "/short" then [200, { "content-length" => "10" }, ["abc"]]
  when "/long" then [200, { "content-length" => "2" }, ["abc"]]
  when "/chunk-late"
    body = Enumerator.new { |y| y << "first"; sleep 0.05; y << 42 }
    [200, { "content-type" => "text/plain" }, body]
  else [404, {}, ["not found"]]
  end
end

linted = Rack::Lint.new(app)
run lambda { |env|
  path = env["PATH_INFO"]
  next malformed.call(env) if path.start_with?("/malformed/")
  next raw.call(env) if path.start_with?("/raw/") || path.empty? || path == "*" # OPTIONS *: "" before Rack 3.1

  linted.call(env)
}
