# frozen_string_literal: true

require "socket"

module Ruvoy
  # env["rack.hijack"] (set where rack.hijack? is true: HTTP/1.x requests
  # without a body): hands the request's connection to the app and returns
  # its IO, also left in env["rack.hijack_io"]. The request ends for the
  # server then; what the app returns is not sent. Call it from the
  # request's own fiber.
  HIJACK = lambda do
    id = Ruvoy._current_request
    raise IOError, "ruvoy: rack.hijack is called once, from the request's own fiber" unless id

    Ruvoy._hijack(id)
  end

  # The IO of the app's end of a hijacked connection (rv_hijack.c): a
  # socket that Ruvoy's Go side pumps to and from the client, over TLS
  # too; reads and writes wait in the Fiber scheduler. Closing it closes
  # the client's connection.
  def self._hijack_io(fd)
    io = UNIXSocket.for_fd(fd)
    io.sync = true
    io
  end
end
