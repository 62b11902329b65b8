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

  # The hijacked connections apps hold, weakly: an IO the app drops is
  # collected (and its descriptor closed) as usual.
  HIJACKED = ObjectSpace::WeakMap.new

  # The IO of a hijacked connection (rv_hijack.c): the client's own TCP
  # socket, or (over TLS, and where bytes were read ahead) a socket that
  # Ruvoy's Go side pumps to and from the client. Reads and writes wait in
  # the Fiber scheduler. Closing it closes the client's connection.
  def self._hijack_io(fd, tcp)
    io = (tcp ? TCPSocket : UNIXSocket).for_fd(fd)
    io.sync = true
    HIJACKED[io] = true
    io
  end

  # Before the VM is cleaned up (rv_boot.c): EventMachine, the reactor
  # faye-websocket runs in a thread, crashed once in its release_machine
  # ([BUG] Segmentation fault) when Ruby killed that thread in mid-loop at
  # exit; it is stopped first and given a moment to end.
  def self._before_cleanup
    return unless defined?(EventMachine) && EventMachine.reactor_running?

    EventMachine.stop_event_loop
    EventMachine.reactor_thread&.join(2)
  end

  # How many of them are open (the ruvoy_hijacked_connections gauge).
  # (WeakMap#each_key makes no Enumerator on Ruby 3.1.)
  def self._hijacked_count
    open = 0
    HIJACKED.each_key { |io| open += 1 unless io.closed? }
    open
  end
end
