# The app the systemd notify tests run (test/systemd_test.go). It boots
# slowly (SYSTEMD_BOOT_SLEEP seconds), then writes SYSTEMD_BOOTED's file:
# READY=1 must come after. /spin holds the VM thread: Ruby that never
# yields for s seconds.
sleep Float(ENV.fetch("SYSTEMD_BOOT_SLEEP", "0"))
# One file a boot, in the directory SYSTEMD_BOOTED names.
File.write(File.join(ENV["SYSTEMD_BOOTED"], "#{Process.pid}-#{rand(1 << 30)}"), "") if ENV["SYSTEMD_BOOTED"]
# Read as the app boots: what the process's environment held for the app.
$notify_env = %w[NOTIFY_SOCKET WATCHDOG_USEC WATCHDOG_PID].map { |k| "#{k}=#{ENV[k].inspect}" }.join(" ")

run lambda { |env|
  text = { "content-type" => "text/plain" }
  query = Rack::Utils.parse_query(env["QUERY_STRING"])
  case env["PATH_INFO"]
  when "/spin" # answers when it began, on CLOCK_MONOTONIC (ns), which the test reads too
    began = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
    deadline = began + (Float(query.fetch("s")) * 1e9).to_i
    x = 0
    x += 1 while Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond) < deadline
    [200, text, ["spun #{began}"]]
  when "/sleep"
    sleep Float(query.fetch("s"))
    [200, text, ["slept"]]
  when "/env"
    [200, text, [$notify_env]]
  else
    [200, text, [Process.pid.to_s]]
  end
}
