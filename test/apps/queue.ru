# The app of test/queuetime_test.go: what a request's X-Request-Start says
# and when the app was called (microseconds since the epoch), after a sleep
# that keeps its place (fibers: a place in Ruby, not the VM thread).
require "json"

app = lambda do |env|
  called = (Time.now.to_r * 1_000_000).to_i
  sleep(Float(Rack::Request.new(env).params.fetch("s", "0")))
  body = JSON.generate("start" => env["HTTP_X_REQUEST_START"], "called_us" => called, "pid" => Process.pid)
  [200, { "content-type" => "application/json", "content-length" => body.bytesize.to_s }, [body]]
end
run Rack::Lint.new(app)
