# The app the container tests run with ruvoy as PID 1 (test/container_test.go).
run lambda { |env|
  req = Rack::Request.new(env)
  text = { "content-type" => "text/plain" }
  case req.path_info
  when "/"
    [200, text, ["ok #{Process.pid}"]]
  when "/slow"
    sleep Float(req.params.fetch("s", "1"))
    [200, text, ["slept"]]
  when "/orphan"
    # A child that starts a grandchild and exits: the app waits for the
    # child, and the grandchild, orphaned, goes to init (or a subreaper).
    # Its pid, as this process sees it.
    out = IO.popen(["sh", "-c", "sleep #{Float(req.params.fetch("s", "1"))} >/dev/null 2>&1 & echo $!"], &:read)
    [200, text, [out.strip]]
  when "/wait-later"
    # The app's own child, waited for late: it must still be the app's
    # to wait for (a reaper that took it would make this ECHILD).
    pid = Process.spawn("true")
    sleep Float(req.params.fetch("s", "2"))
    _, status = Process.wait2(pid)
    [200, text, ["waited #{status.exitstatus}"]]
  else
    [404, text, ["not found"]]
  end
}
