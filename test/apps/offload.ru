# The app the offload and hold-detector tests talk to (test/offload_test.go).
# Blocking is a test-only C extension built from test/ext/blocking.
$LOAD_PATH.unshift(ENV.fetch("RUVOY_TEST_EXT"))
require "blocking"
require "json"

LIMITED = Ruvoy::Offload.new(limit: 4)
# Pools used while the app loads (before the fork under --preload).
if ENV["OFFLOAD_AT_BOOT"]
  Ruvoy.offload { :warm }
  LIMITED.call { :warm }
end
EVENTS = []

def text(body) = [200, { "content-type" => "text/plain" }, [body.to_s]]

app = lambda do |env|
  query = Rack::Utils.parse_query(env["QUERY_STRING"])
  ms = Integer(query.fetch("ms", "50"))
  case env["PATH_INFO"]
  when "/block" then Blocking.sleep_nogvl(ms); text "blocked"
  when "/offload" then text Ruvoy.offload { Blocking.sleep_nogvl(ms); "offloaded" }
  when "/limited" then text LIMITED.call { Blocking.sleep_nogvl(ms); "limited" }
  when "/value" then text Ruvoy.offload { 6 * 7 }
  when "/raise"
    begin
      Ruvoy.offload { raise ArgumentError, "raised in the offload thread" }
    rescue ArgumentError => e
      text "#{e.class}: #{e.message} at #{e.backtrace.first}"
    end
  when "/thread-local"
    Thread.current[:who] = "caller"
    text Ruvoy.offload { Thread.current[:who].inspect }
  when "/leave"
    begin
      Ruvoy.offload { Blocking.sleep_nogvl(ms); EVENTS << "block done" }
      EVENTS << "after the call"
    ensure
      EVENTS << "ensure ran"
    end
    text "left"
  when "/events" then [200, { "content-type" => "application/json" }, [JSON.generate(EVENTS)]]
  when "/stall"
    Blocking.sleep_gvl(ms) # holds the VM thread: the stall detector names this line
    text "stalled"
  else [404, { "content-type" => "text/plain" }, ["not found"]]
  end
end

use Rack::Lint
run app
