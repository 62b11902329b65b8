# The app of the fork hooks' tests (test/hooks_test.go): it opens a
# listening socket while it loads, as a Redis or database client opens its
# connection, and its Ruvoy hooks write when they run to HOOKS_LOG, a line
# each: "before_fork PID", "on_worker_boot INDEX PID",
# "on_worker_shutdown INDEX PID".
require "socket"

def hook_event(*words)
  File.open(ENV.fetch("HOOKS_LOG"), "a") { |f| f.write("#{[*words, Process.pid].join(" ")}\n") }
end

# Which socket this process holds: its port, and the kernel's inode of it
# (the same in every process that shares it).
def socket_identity(server)
  "#{server.addr[1]} #{File.readlink("/proc/self/fd/#{server.fileno}")}"
end

$listener = TCPServer.new("127.0.0.1", 0)
LOADED_WITH = socket_identity($listener)

# HOOKS_RAISE names a hook that raises; with HOOKS_RAISE_IF, only while
# that file exists.
def raise_in?(hook)
  ENV["HOOKS_RAISE"] == hook && (!ENV["HOOKS_RAISE_IF"] || File.exist?(ENV["HOOKS_RAISE_IF"]))
end

Ruvoy.before_fork do
  raise "boom in before_fork" if raise_in?("before_fork")

  hook_event "before_fork"
  # The template's socket is not the workers' business.
  $listener.close if ENV["HOOKS_REOPEN"]
end

Ruvoy.on_worker_boot do |index|
  raise "boom in on_worker_boot" if raise_in?("on_worker_boot")

  # Each worker its own socket: the one it inherited is the template's.
  $listener = TCPServer.new("127.0.0.1", 0) if ENV["HOOKS_REOPEN"]
  hook_event "on_worker_boot", index
end

Ruvoy.on_worker_shutdown do
  raise "boom in on_worker_shutdown" if raise_in?("on_worker_shutdown")
end

Ruvoy.on_worker_shutdown do |index|
  hook_event "on_worker_shutdown", index
end

use Rack::Lint
run lambda { |env|
  text = { "content-type" => "text/plain" }
  case env["PATH_INFO"]
  when "/pid"
    [200, text, [Process.pid.to_s]]
  when "/socket"
    # pid, then the socket loaded with, then the socket held now.
    [200, text, ["#{Process.pid} #{LOADED_WITH} #{socket_identity($listener)}"]]
  when "/grow"
    $grown = "x" * (Integer(Rack::Request.new(env).params.fetch("mib")) << 20)
    [200, text, [Process.pid.to_s]]
  else
    [404, text, ["not found"]]
  end
}
