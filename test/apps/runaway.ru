# The app the runaway-request tests talk to (test/runaway_test.go): requests
# that sleep, compute, loop forever, or loop and swallow whatever is raised
# into them, each recording what its ensure saw. With RACK_TIMEOUT set, Rack::Timeout
# (service_timeout in seconds) wraps it.
require "json"

$stdout.sync = true
EVENTS = []
at_exit { puts "runaway.ru at_exit ran, events: #{JSON.generate(EVENTS)}" }

def text(body, status = 200) = [status, { "content-type" => "text/plain" }, [body]]

app = lambda do |env|
  query = Rack::Utils.parse_query(env["QUERY_STRING"])
  name = query.fetch("name", env["PATH_INFO"])
  case env["PATH_INFO"]
  when "/events"
    [200, { "content-type" => "application/json" }, [JSON.generate(EVENTS)]]
  when "/sleep"
    begin
      sleep Float(query.fetch("s"))
      text "slept"
    ensure
      EVENTS << "#{name}: ensure (#{$!&.class || "done"})"
    end
  when "/spin"
    begin
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + Float(query.fetch("s"))
      x = 0
      x += 1 while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
      text "spun"
    ensure
      EVENTS << "#{name}: ensure (#{$!&.class || "done"})"
    end
  when "/loop"
    begin
      x = 0
      loop { x += 1 }
    ensure
      EVENTS << "#{name}: ensure (#{$!&.class || "done"})"
    end
  when "/stubborn"
    # Swallows every exception raised into it, and never yields.
    loop do
      x = 0
      loop { x += 1 }
    rescue Exception # rubocop:disable Lint/RescueException
      EVENTS << "#{name}: swallowed #{$!.class}"
    end
  else
    text "hello"
  end
end

if ENV["RACK_TIMEOUT"]
  require "rack-timeout"
  Rack::Timeout::Logger.disable
  use Rack::Timeout, service_timeout: Float(ENV["RACK_TIMEOUT"]).to_i
end
run app
