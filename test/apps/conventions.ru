# The Rack and Rails conventions users reach for first (conventions_test.go).
require "rack/lint"

# The server's own rack.early_hints, before Rack 3's Lint wraps it in its
# checks: /hints/bad shows what ruvoy refuses.
use(Class.new do
  def initialize(app) = @app = app
  def call(env) = @app.call(env.merge("test.early_hints" => env["rack.early_hints"]))
end)
use Rack::Lint

# Several values of a header: lines of one String in Rack 2, an Array in Rack 3.
multi = ->(*values) { Rack.release.to_i >= 3 ? values : values.join("\n") }

run lambda { |env|
  case env["PATH_INFO"]
  when "/hints"
    # As Rails does: no key, no hints.
    hints = env["rack.early_hints"]
    hints&.call("link" => multi.("</style.css>; rel=preload; as=style", "</app.js>; rel=preload; as=script"))
    [200, { "content-type" => "text/plain", "link" => "</final>" }, [hints ? "hinted\n" : "not hinted\n"]]
  when "/hints/late"
    body = Enumerator.new do |y|
      y << "a"
      env["rack.early_hints"].call("link" => "</late.css>; rel=preload")
      y << "b"
    end
    [200, { "content-type" => "text/plain" }, body]
  when "/hints/bad"
    env["test.early_hints"].call("Bad Name" => "x")
    [200, { "content-type" => "text/plain" }, ["not reached\n"]]
  when "/whoami"
    req = Rack::Request.new(env)
    text = "SCRIPT_NAME=#{env["SCRIPT_NAME"]} PATH_INFO=#{env["PATH_INFO"]} " \
           "REMOTE_USER=#{env.fetch("REMOTE_USER", "(none)")} url=#{req.url}\n"
    [200, { "content-type" => "text/plain" }, [text]]
  when "/request-id"
    [200, { "content-type" => "text/plain" }, [env.fetch("HTTP_X_REQUEST_ID", "(none)")]]
  when "/page"
    [200, { "content-type" => "text/html; charset=utf-8" }, ["<p>#{"ruvoy serves Rack " * 20}</p>\n" * 50]]
  when "/stream"
    body = Enumerator.new do |y|
      3.times { |i| y << "chunk #{i} " * 100 + "\n"; sleep 0.3 }
    end
    [200, { "content-type" => "text/plain" }, body]
  when "/raise"
    raise ArgumentError, "conventions: the app failed here"
  else
    [404, { "content-type" => "text/plain" }, ["not found\n"]]
  end
}
