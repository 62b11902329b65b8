# The warnings' app (test/warnings_test.go): code that holds the VM thread
# while it loads or compiles, or while it computes; a response that asks
# the server to send a file (X-Sendfile).
require "erb"

module Holding
  # Holds the VM thread for ms milliseconds, yielding to no one.
  def self.hold(ms)
    t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    nil while Process.clock_gettime(Process::CLOCK_MONOTONIC) - t < ms / 1000.0
  end
end

# A large template: compiling it takes a few hundred milliseconds.
TEMPLATE = "<p><%= x %> and <% if y %>yes<% end %></p>\n" * 40_000

use Rack::Lint
run lambda { |env|
  case env["PATH_INFO"]
  when "/load" # a file loaded at request time, as development's autoload does
    load File.join(__dir__, "warnings_slow_file.rb")
  when "/compile" # a template compiled at request time, as on its first render
    ERB.new(TEMPLATE)
  when "/busy" # the request's own code
    Holding.hold(300)
  when "/sendfile"
    return [200, { "content-type" => "text/plain", "x-sendfile" => File.join(__dir__, "file.txt") }, []]
  end
  [200, { "content-type" => "text/plain" }, ["done"]]
}
