# The app the streaming end-to-end tests talk to (test/stream_test.go).
require "json"
require "digest"

$stdout.sync = true
STATS = Hash.new(0)
CHUNK = ("x" * 65536).freeze

# Counts what it yields and whether it was closed.
class Tracked
  def initialize(name, &producer)
    @name, @producer = name, producer
  end

  def each(&block)
    @producer.call(->(chunk) { block.call(chunk); STATS["#{@name}.chunks"] += 1 })
  end

  def close
    STATS["#{@name}.closed"] += 1
  end
end

# A Rack 3 streaming body: it writes and reads the stream itself.
class Echo
  def call(stream)
    loop { stream.write(stream.readpartial(65536)) }
  rescue EOFError
    stream.write("<eof>")
  ensure
    stream.close
  end
end

app = lambda do |env|
  query = Rack::Utils.parse_query(env["QUERY_STRING"])
  case env["PATH_INFO"]
  when "/ping"
    [200, { "content-type" => "text/plain" }, ["pong"]]
  when "/ttfb"
    [200, { "content-type" => "text/plain" }, Enumerator.new { |y| y << "a"; sleep 0.5; y << "b" }]
  when "/big"
    chunks = Integer(query.fetch("mb")) * 16
    name = query.fetch("name", "big")
    [200, { "content-type" => "application/octet-stream" },
     Tracked.new(name) { |out| chunks.times { out.call(CHUNK) } }]
  when "/whole"
    # One large String in an Array: sent in window-sized pieces.
    size = Integer(query.fetch("bytes"))
    body = Random.new(size).bytes(size)
    [200, { "content-type" => "application/octet-stream", "content-length" => size.to_s }, [body]]
  when "/sse"
    name = query.fetch("name", "sse")
    body = Tracked.new(name) do |out|
      out.call("data: hello\n\n")
      loop { sleep 30; out.call(": ping\n\n") }
    end
    [200, { "content-type" => "text/event-stream", "cache-control" => "no-cache" }, body]
  when "/cut"
    [200, { "content-type" => "text/plain" }, Enumerator.new { |y| y << "part"; sleep 0.05; raise "cut on purpose" }]
  when "/upload"
    # Reads 64 KiB at a time (pausing between reads when asked); once 1 MiB
    # is in, rewinds and checks the first MiB comes back the same.
    input = env["rack.input"]
    pause = Float(query.fetch("pause", "0"))
    mib = 1 << 20
    first_read = nil
    rewind_ok = nil
    digest = Digest::SHA256.new
    first_mib = Digest::SHA256.new
    total = 0
    buf = String.new
    while input.read(65536, buf)
      first_read ||= Time.now.to_f
      first_mib << buf.byteslice(0, mib - total) if total < mib
      digest << buf
      total += buf.bytesize
      if rewind_ok.nil? && total >= mib
        input = env["test.input"] # Rack 3's Lint has no rewind: ruvoy's rack.input does
        input.rewind
        rewind_ok = Digest::SHA256.digest(input.read(mib)) == first_mib.digest
        input.read(total - mib)
      end
      sleep pause if pause > 0
    end
    [200, { "content-type" => "application/json" },
     [JSON.generate("bytes" => total, "sha256" => digest.hexdigest, "first_read" => first_read,
                    "rewind_ok" => rewind_ok)]]
  when "/ignore-body"
    [200, { "content-type" => "text/plain" }, ["ignored"]]
  when "/read-all"
    body = env["rack.input"].read
    [200, { "content-type" => "text/plain" }, [body.bytesize.to_s]]
  when "/stats"
    [200, { "content-type" => "application/json" },
     [JSON.generate(STATS.merge("fds" => Dir.children("/proc/self/fd").size, "live" => Ruvoy.live_requests))]]
  else
    [404, { "content-type" => "text/plain" }, ["not found"]]
  end
end

# Rack 2.2's Lint knows no streaming bodies (call without each): /echo skips it.
linted = Rack::Lint.new(app)
run lambda { |env|
  if env["PATH_INFO"] == "/echo"
    [200, { "content-type" => "application/octet-stream" }, Echo.new]
  else
    linted.call(env.merge("test.input" => env["rack.input"]))
  end
}
