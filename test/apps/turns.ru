# The app of TestOverloadTurnIsBounded (test/overload_test.go): requests
# that keep the VM thread busy in slices of 2 ms, each yielding after its
# slice (the event loop then has them all ready at once), and probes, sent
# to this server by one of them from inside its slice, that record how many
# slices ran between their sending and their start. Counted in slices, not
# milliseconds: what the test judges does not depend on how busy the machine
# is.
require "json"
require "socket"

SLICE = 0.002
PROBES = 15
PROBE_EVERY = 10 # slices

$spinners = 0
$running = 0
$slices = 0
$sent = []    # $slices when each probe was sent
$waited = []  # slices that ran between a probe's sending and its start
$probe_socket = nil

def slice
  began = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  nil while Process.clock_gettime(Process::CLOCK_MONOTONIC) - began < SLICE
  $slices += 1
end

def done? = $waited.size >= PROBES || $slices > 20_000

run lambda { |env|
  case env["PATH_INFO"]
  when "/spin"
    $spinners = env["QUERY_STRING"].to_i
    $running += 1
    until done?
      slice
      if $running >= $spinners && $probe_socket && $slices % PROBE_EVERY == 0 && $sent.size == $waited.size &&
         $sent.size < PROBES
        $sent << $slices
        $probe_socket.write_nonblock("GET /probe HTTP/1.1\r\nHost: x\r\n\r\n")
      end
      sleep 0
    end
    [200, {}, ["spun"]]
  when "/connect" # the socket probes are sent on, opened before the spinning starts
    $probe_socket = TCPSocket.new("127.0.0.1", env["SERVER_PORT"].to_i)
    [200, {}, ["connected"]]
  when "/probe"
    $waited << $slices - $sent.last
    [200, {}, ["probed"]]
  when "/waited"
    [200, { "content-type" => "application/json" }, [JSON.generate($waited)]]
  else
    [404, {}, ["not found"]]
  end
}
