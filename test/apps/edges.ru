# The app the HTTP-edge tests talk to (test/edges_test.go). It records every
# request it is called for, so that a test can tell that bytes sent after a
# malformed request never reached it as a request of their own.
require "json"

SEEN = []

# A body that fails: at once, or after its first wait (its head is out by
# then: ruvoy sends the head when a body first waits).
class FailingBody
  def initialize(wait) = @wait = wait

  def each
    sleep @wait if @wait
    raise "the body failed on purpose"
  end
end

# A body whose end follows its one chunk after 30 microseconds of Ruby
# (no wait): the VM sends its head and its end in two messages.
class LateEndBody
  def each
    yield "late end"
    until_ = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 30e-6
    nil while Process.clock_gettime(Process::CLOCK_MONOTONIC) < until_
  end
end

app = lambda do |env|
  SEEN << "#{env["REQUEST_METHOD"]} #{env["REQUEST_URI"]}"
  query = Rack::Utils.parse_query(env["QUERY_STRING"])
  if env["REQUEST_URI"] == "*" # PATH_INFO is "" before Rack 3.1, then "*"
    next [200, { "content-type" => "text/plain" }, ["asterisk: #{env["REQUEST_METHOD"]} #{env["REQUEST_URI"]}"]]
  end
  case env["PATH_INFO"]
  when "/seen"
    [200, { "content-type" => "application/json" }, [JSON.generate(SEEN)]]
  when "/echo"
    [200, { "content-type" => "application/octet-stream" }, [env["rack.input"].read]]
  when "/slow"
    sleep 0.2
    [200, { "content-type" => "text/plain" }, ["slow"]]
  when "/slow-forever"
    sleep 3600
    [200, { "content-type" => "text/plain" }, ["never"]]
  when "/page"
    [200, { "content-type" => "text/html" }, ["<html>#{"x" * 720}</html>"]]
  when "/untyped"
    [200, {}, ["\x89PNG\r\n\x1a\n\0\0\0\rIHDR".b]]
  when "/server"
    [200, { "content-type" => "text/plain", "server" => "EdgesApp/1.0" }, ["named"]]
  when "/fail"
    [200, { "content-type" => "text/plain" }, FailingBody.new(query["wait"] && Float(query["wait"]))]
  when "/remote"
    [200, { "content-type" => "text/plain" }, [env["REMOTE_ADDR"]]]
  when "/late-end"
    [200, { "content-type" => "text/plain" }, LateEndBody.new]
  when "/sendfile"
    [200, { "content-type" => "text/plain", "x-sendfile" => query.fetch("path") }, []]
  else
    [200, { "content-type" => "text/plain" }, ["hello #{env["PATH_INFO"]}"]]
  end
end

use Rack::Lint
use Rack::Head
run app
