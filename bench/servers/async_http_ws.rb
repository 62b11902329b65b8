# frozen_string_literal: true

# The WebSocket benchmark's app (bench/apps/ws.ru: an echo at /echo, a
# broadcast at /fanout, "count" answered with the number of listeners)
# written for async-http's server with async-websocket instead of faye.
# Debian packages neither async-websocket nor protocol-websocket: bench/ws
# runs this only from checkouts made by hand (async-websocket 0.22 and
# protocol-websocket 0.9 go with Debian's async-http 0.59), never committed:
#
#   ruby -I /tmp/async-websocket/lib -I /tmp/protocol-websocket/lib bench/servers/async_http_ws.rb PORT
require "async"
require "async/http/server"
require "async/http/endpoint"
require "async/websocket/adapters/http"

port = ARGV.fetch(0)

# Every connection runs in its own fiber of one thread: no lock needed.
listeners = []

echo = lambda do |connection|
  while (message = connection.read)
    connection.write(message)
    connection.flush
  end
end

fanout = lambda do |connection|
  listeners << connection
  while (message = connection.read)
    if message.buffer == "count"
      connection.write("count #{listeners.size}")
      connection.flush
    else
      listeners.each do |listener|
        listener.write(message)
        listener.flush
      rescue IOError, SystemCallError, Protocol::WebSocket::Error
        nil # that listener is gone; its own fiber removes it
      end
    end
  end
ensure
  listeners.delete(connection)
end

handler = lambda do |request|
  Async::WebSocket::Adapters::HTTP.open(request) do |connection|
    (request.path == "/fanout" ? fanout : echo).call(connection)
  rescue IOError, SystemCallError, Protocol::WebSocket::Error
    nil # the client went away
  end or Protocol::HTTP::Response[200, { "content-type" => "text/plain" }, ["ok\n"]]
end

Async do
  Async::HTTP::Server.for(Async::HTTP::Endpoint.parse("http://127.0.0.1:#{port}"), &handler).run
end
