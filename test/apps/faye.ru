# The app the WebSocket end-to-end tests talk to (test/websocket_test.go):
# a faye-websocket echo at /echo, and figures about its connections at
# /stats. Served by ruvoy and by Puma alike.
require "json"
require "faye/websocket"

$stdout.sync = true
STATS = Hash.new(0)

# Echoes every message as it came: text as text, binary as binary (faye
# gives binary data as an Array of bytes, and sends an Array as binary).
# "close-me" asks the server to close, with code 4000; "ping-me" to send a
# ping, and "pong seen" once the client's pong came back.
ECHO = lambda do |env|
  ws = Faye::WebSocket.new(env)
  ws.on(:open) { STATS["open"] += 1 }
  ws.on(:message) do |e|
    STATS["messages"] += 1
    if e.data == "close-me"
      ws.close(4000, "asked to")
    elsif e.data == "ping-me"
      ws.ping("from the server") { ws.send("pong seen") }
    else
      ws.send(e.data)
    end
  end
  ws.on(:close) do |e|
    STATS["closed"] += 1
    STATS["close.#{e.code}"] += 1
  end
  ws.rack_response
end

# Only what faye would take for a WebSocket (and the version it speaks,
# with a key) reaches it: anything else is answered here, in HTTP.
# Rack::Lint (2.2) cannot wrap the WebSocket itself: its hijack IO wrapper
# has no fileno, which EventMachine.attach needs (TypeError in the
# reactor), and faye answers with status -1, which Lint rejects.
class WebSockets
  def initialize(app) = @app = app

  def call(env)
    return @app.call(env) unless env["PATH_INFO"] == "/echo" && Faye::WebSocket.websocket?(env)
    return ECHO.call(env) if env["HTTP_SEC_WEBSOCKET_VERSION"] == "13" && env["HTTP_SEC_WEBSOCKET_KEY"]

    STATS["refused"] += 1
    [400, { "content-type" => "text/plain", "sec-websocket-version" => "13" }, ["a WebSocket needs Sec-WebSocket-Version 13 and a Sec-WebSocket-Key\n"]]
  end
end

app = lambda do |env|
  case env["PATH_INFO"]
  when "/echo"
    [426, { "content-type" => "text/plain", "upgrade" => "websocket" }, ["/echo is a WebSocket\n"]]
  when "/stats"
    [200, { "content-type" => "application/json" }, [JSON.generate(STATS)]]
  else
    [404, { "content-type" => "text/plain" }, ["not found\n"]]
  end
end

use WebSockets
use Rack::Lint
run app
