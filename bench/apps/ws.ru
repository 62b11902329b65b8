# The WebSocket benchmark's app (bench/ws), the same for every server:
# faye-websocket, an echo at /echo and a broadcast at /fanout (a message
# "count" is answered to its sender alone with the number of listeners).
require "faye/websocket"

# Listeners of /fanout. faye runs every callback on EventMachine's reactor
# thread, so only that thread touches the list.
LISTENERS = []

run lambda { |env|
  next [200, { "content-type" => "text/plain" }, ["ok\n"]] unless Faye::WebSocket.websocket?(env)

  ws = Faye::WebSocket.new(env)
  if env["PATH_INFO"] == "/fanout"
    ws.on(:open) { LISTENERS << ws }
    ws.on(:message) do |e|
      if e.data == "count"
        ws.send("count #{LISTENERS.size}")
      else
        LISTENERS.each { |l| l.send(e.data) }
      end
    end
    ws.on(:close) { LISTENERS.delete(ws) }
  else
    ws.on(:message) { |e| ws.send(e.data) }
  end
  ws.rack_response
}
