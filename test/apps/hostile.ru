# The app the hostile-client tests talk to (test/hostile_*_test.go): pages
# and streams for clients that never read, and a body that fails midway.
$stdout.sync = true
PAGE = ("p" * 102_400).freeze
PAGE256 = ("q" * 262_144).freeze
CHUNK = ("s" * 65_536).freeze

use Rack::Lint
run lambda { |env|
  text = { "content-type" => "text/plain" }
  case env["PATH_INFO"]
  when "/ok"
    [200, text, ["ok"]]
  when "/page" # 100 KiB
    [200, { "content-type" => "text/html" }, [PAGE]]
  when "/page256" # 256 KiB
    [200, { "content-type" => "text/html" }, [PAGE256]]
  when "/big" # 200 MiB, streamed
    [200, { "content-type" => "application/octet-stream" }, Enumerator.new { |y| 3200.times { y << CHUNK } }]
  when "/parts" # two parts, then the body fails
    [200, text, Enumerator.new { |y| y << "part1"; y << "part2"; raise "the body failed on purpose" }]
  else
    [404, text, ["not found"]]
  end
}
