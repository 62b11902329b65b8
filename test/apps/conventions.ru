# The Rack and Rails conventions users reach for first (conventions_test.go).
require "rack/lint"

use Rack::Lint

run lambda { |env|
  case env["PATH_INFO"]
  when "/hints"
    # As Rails does: no key, no hints.
    hints = env["rack.early_hints"]
    hints&.call("Link" => "</style.css>; rel=preload; as=style\n</app.js>; rel=preload; as=script")
    [200, { "content-type" => "text/plain", "link" => "</final>" }, [hints ? "hinted\n" : "not hinted\n"]]
  when "/hints/late"
    body = Enumerator.new do |y|
      y << "a"
      env["rack.early_hints"].call("Link" => "</late.css>; rel=preload")
      y << "b"
    end
    [200, { "content-type" => "text/plain" }, body]
  when "/hints/bad"
    env["rack.early_hints"].call("Bad Name" => "x")
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
