# A chat room: the page at / opens a WebSocket to / and shows what comes
# back; each message is sent to every client connected to this process.
require "sinatra/base"
require "faye/websocket"

class Chat < Sinatra::Base
  # The open sockets. faye runs every callback on EventMachine's reactor
  # thread, so only that thread touches the list.
  CLIENTS = []

  def self.broadcast(text)
    CLIENTS.each { |ws| ws.send(text) }
  end

  get "/" do
    return erb(:page) unless Faye::WebSocket.websocket?(request.env)

    ws = Faye::WebSocket.new(request.env)
    ws.on(:open) do
      CLIENTS << ws
      Chat.broadcast("* #{CLIENTS.size} connected")
    end
    ws.on(:message) { |e| Chat.broadcast(e.data.to_s) }
    ws.on(:close) do
      CLIENTS.delete(ws)
      Chat.broadcast("* #{CLIENTS.size} connected")
    end
    ws.rack_response
  end

  template :page do
    <<~HTML
      <!doctype html>
      <title>chat</title>
      <ul id="log"></ul>
      <form id="say"><input id="text" autofocus autocomplete="off"> <button>send</button></form>
      <script>
        const ws = new WebSocket(location.href.replace(/^http/, "ws"));
        ws.onmessage = (e) => log.appendChild(document.createElement("li")).textContent = e.data;
        ws.onclose = () => log.appendChild(document.createElement("li")).textContent = "* disconnected";
        say.onsubmit = (e) => { e.preventDefault(); ws.send(text.value); text.value = ""; };
      </script>
    HTML
  end
end
