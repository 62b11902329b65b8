# The app the hijack end-to-end tests talk to (test/hijack_test.go):
# full and partial rack.hijack, a Rack 3 upgrade (101 with a body that
# responds to call), and figures about what they did.
require "json"

$stdout.sync = true
STATS = Hash.new(0)

# Echoes 5-byte messages until "bye!!", then closes. (A config.ru's
# methods would be Rack::Builder's: these are lambdas.)
ECHO = lambda do |io|
  loop do
    msg = io.read(5)
    break if msg.nil? || msg == "bye!!"
    io.write(msg)
  end
  STATS["echo.ended"] += 1
rescue IOError, SystemCallError => e
  STATS["echo.#{e.class}"] += 1
ensure
  io.close unless io.closed?
end

# Writes until the client stops reading: how much it got out is in STATS.
FLOOD = lambda do |io|
  chunk = "x" * 65536
  loop do
    io.write(chunk)
    STATS["flood.bytes"] += chunk.bytesize
  end
rescue IOError, SystemCallError
  STATS["flood.ended"] += 1
ensure
  io.close unless io.closed?
end

UPGRADE_HEAD = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n"

# Rack::Lint (2.2) knows nothing of bodies that respond to call: the
# upgrade route is outside it.
class Upgrade
  def initialize(app) = @app = app

  def call(env)
    # /upgrade-always answers 101 whatever was asked (over HTTP/2 too)
    return [101, { "upgrade" => "echo", "connection" => "Upgrade" }, ECHO] if env["PATH_INFO"] == "/upgrade-always"
    return @app.call(env) unless env["PATH_INFO"] == "/upgrade"
    return [400, { "content-type" => "text/plain" }, ["not an upgrade\n"]] unless env["HTTP_UPGRADE"] == "echo"

    [101, { "upgrade" => "echo", "connection" => "Upgrade" }, ECHO]
  end
end

app = lambda do |env|
  case env["PATH_INFO"]
  when "/full"
    io = env["rack.hijack"].call
    io.write(UPGRADE_HEAD)
    ECHO.call(io)
    [200, {}, []]
  when "/full-flood"
    io = env["rack.hijack"].call
    io.write(UPGRADE_HEAD)
    FLOOD.call(io)
    [200, {}, []]
  when "/full-raise"
    env["rack.hijack"].call.close
    raise "after the hijack"
  when "/partial"
    [200, { "content-type" => "text/plain", "rack.hijack" => lambda { |io| io.write("partial body\n"); io.close } }, []]
  when "/partial-echo"
    [101, { "upgrade" => "echo", "connection" => "Upgrade", "rack.hijack" => ECHO }, []]
  when "/late"
    # hijacking once the response has begun is refused
    body = Enumerator.new do |y|
      y << "begun\n"
      begin
        env["rack.hijack"].call
      rescue IOError => e
        y << "refused: #{e.message}\n"
      end
    end
    [200, { "content-type" => "text/plain" }, body]
  when "/hijackp"
    [200, { "content-type" => "text/plain" }, [env["rack.hijack?"].inspect]]
  when "/stats"
    [200, { "content-type" => "application/json" }, [JSON.generate(STATS)]]
  else
    [404, { "content-type" => "text/plain" }, ["not found\n"]]
  end
end

use Upgrade
use Rack::Lint
run app
